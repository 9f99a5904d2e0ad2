"""TreeRollout: the PaTR rollout loop of one group, driven from Python.

The server owns the tree logic (routing with the run's tree config, children,
advantages); this helper keeps the trainer's side of it: the active branches
with their full histories, and deterministic client keys so that a repeated
request (a retry, or a restarted trainer re-sending what it sent before) gets
the first answer instead of writing twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from .client import Client
from .types import Advantage, Group, RouteResult, Turn

__all__ = ["Branch", "TreeRollout"]


@dataclass
class Branch:
    """An active branch: its node id, its full history (the inherited prefix
    included) and how many of those turns are its own (stored on it)."""
    node: int
    history: List[Turn] = field(default_factory=list)
    own_turns: int = 0

    @property
    def path_len(self) -> int:
        return len(self.history)


class TreeRollout:
    """One group's tree: open → append turns → route each interval → finish
    leaves → close → advantages. Create it with ``open`` or ``resume``."""

    def __init__(self, client: Client, run: str, group: Group, branches: Sequence[Branch], interval: int):
        self.client = client
        self.run = run
        self.group = group
        self.interval = interval
        self.branches: Dict[int, Branch] = {b.node: b for b in branches}
        self.leaves: Dict[int, float] = {}
        self.advantages: Optional[List[Advantage]] = None

    # ---- starting ----

    @classmethod
    def open(cls, client: Client, run: str, step: int, task: str = "", prompt: str = "", gold: str = "",
             index: int = 0, meta: Optional[Mapping[str, str]] = None) -> "TreeRollout":
        """Opens a group with the run's B0 root branches. ``index`` tells apart the
        groups of one step; with the step it makes the request's client key, so
        calling ``open`` again after a crash returns the same group."""
        res = client.open_group(run, step, task, prompt, gold, meta, client_key=f"{run}/s{step}/g{index}/open")
        return cls(client, run, res.group, [Branch(n) for n in res.roots], res.group.interval)

    @classmethod
    def resume(cls, client: Client, run: str, group: int) -> "TreeRollout":
        """Rebuilds an open group from the server: its active branches (the
        frontier) with their full trajectories, and the interval it is at."""
        tree = client.tree(run, group)
        branches = []
        for n in sorted(tree.nodes, key=lambda n: n.id):
            if n.status != "active":
                continue
            traj = client.trajectory(run, n.id)
            branches.append(Branch(n.id, [pt.turn() for pt in traj.turns], n.turns))
        r = cls(client, run, tree.group, branches, tree.group.interval)
        for n in tree.nodes:
            if n.has_reward and n.status in ("completed", "truncated", "pruned"):
                r.leaves[n.id] = n.reward
        return r

    @classmethod
    def resume_step(cls, client: Client, run: str, step: int) -> List["TreeRollout"]:
        """Every open group of ``step``, resumed."""
        return [cls.resume(client, run, g.id) for g in client.groups(run, step) if g.status == "open"]

    # ---- the loop ----

    @property
    def active(self) -> List[Branch]:
        """The active branches in node order."""
        return [self.branches[k] for k in sorted(self.branches)]

    @property
    def done(self) -> bool:
        return not self.branches

    def append(self, node: int, turns: Sequence[Turn], env_state: Optional[bytes] = None) -> None:
        """Stores turns at the end of a branch."""
        b = self.branches[node]
        if not turns:
            return
        start = b.own_turns
        self.client.append_turns(self.run, node, start, list(turns), env_state=env_state,
                                 client_key=f"{self.run}/n{node}/t{start}+{len(turns)}")
        b.history.extend(turns)
        b.own_turns += len(turns)

    def finish(self, node: int, reward: float, truncated: bool = False) -> None:
        """Ends a branch that finished (or hit the turn cap) as a leaf."""
        status = "truncated" if truncated else "completed"
        self.client.finish(self.run, node, reward, status, client_key=f"{self.run}/n{node}/finish")
        del self.branches[node]
        self.leaves[node] = reward

    def route(self, scores: Mapping[int, float], rewards: Optional[Mapping[int, float]] = None) -> RouteResult:
        """Submits the interval's process scores of every active branch; applies the
        decisions: pruned branches become leaves, expanded ones are replaced by
        their children (which inherit the parent's whole history)."""
        res = self.client.route(self.run, self.group.id, scores, interval=self.interval, rewards=rewards,
                                client_key=f"{self.run}/g{self.group.id}/i{self.interval}/route")
        for d in res.decisions:
            b = self.branches.pop(d.node)
            if d.action == "prune":
                self.leaves[d.node] = d.reward if d.reward is not None else 0.0
            elif d.action == "expand":
                for c in d.children:
                    self.branches[c] = Branch(c, list(b.history), 0)
            else:
                self.branches[d.node] = b
        self.interval = res.interval + 1
        return res

    def close(self, rubric_scores: Optional[Mapping[int, float]] = None, lambda_: Optional[float] = None,
              rubrics: Optional[Sequence[int]] = None, pool: Optional[Mapping[str, Any]] = None) -> List[Advantage]:
        """Closes the group; returns one GRPO advantage per leaf (leaf id order), shaped
        by ``rubric_scores`` or by the rubric buffer's answers (``pool``, from
        ``Client.shape_answers``)."""
        res = self.client.close_group(self.run, self.group.id, rubric_scores, lambda_, rubrics, pool=pool,
                                      client_key=f"{self.run}/g{self.group.id}/close")
        self.group = res.group
        self.advantages = res.advantages
        return res.advantages

    def grow(self, act: Callable[[List[Turn]], Turn], score: Callable[[List[Turn]], float], k: int,
             max_turns: int = 0, reward: Optional[Callable[[List[Turn]], float]] = None) -> List[Advantage]:
        """Runs the whole loop with one-turn-at-a-time callbacks and closes the group.

        ``act(history)`` returns the next turn (action and the environment's answer,
        ``done`` set when the episode ends); ``score(history)`` the process score in
        [0,1]; ``reward(history)`` a finished leaf's outcome reward (default: the sum
        of its turns' rewards). Each interval advances every branch up to ``k`` turns,
        finishes the ended ones, then routes the rest. A batched trainer writes the
        same loop with ``append``, ``finish`` and ``route`` (see the README).
        """
        reward = reward or (lambda h: sum(t.reward for t in h))
        while self.branches:
            for b in self.active:
                batch: List[Turn] = []
                ended = truncated = False
                for _ in range(k):
                    t = act(b.history + batch)
                    batch.append(t)
                    if t.done:
                        ended = True
                        break
                    if max_turns and b.path_len + len(batch) >= max_turns:
                        ended = truncated = True
                        break
                self.append(b.node, batch)
                if ended:
                    self.finish(b.node, reward(b.history), truncated=truncated)
            if self.branches:
                self.route({b.node: score(b.history) for b in self.active})
        return self.close()
