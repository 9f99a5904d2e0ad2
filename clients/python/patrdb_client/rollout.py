"""Rollout workers and a step driver over the server's lease protocol.

The server keeps every PaTR rule: which branch needs how many turns, when a
score is due, routing, failures, advantages. A worker only leases branches,
samples them with your batched policy, steps your environments, scores, and
submits; it keeps no state between leases, so any number of workers (threads
or processes, on any machines) can grow the same step, and any of them can
die: its leases expire and go to another worker, which samples again from the
last committed turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Union

from .client import Client, Conflict, BadRequest, PatrdbError, new_client_key
from .types import Advantage, Lease, StepStatus, Submission, Submitted, Task, Turn, TurnKey

__all__ = ["ActRequest", "Move", "Observation", "Episode", "Env", "RolloutWorker", "WorkerStats", "StepDriver",
           "drive_step"]


@dataclass
class ActRequest:
    """One branch's next turn to sample: its key (draw randomness from it), its
    task and its full history (inherited prefix included; do not modify it)."""
    key: TurnKey
    task: Task
    history: List[Turn]


@dataclass
class Move:
    """What the policy emits for one turn: the action text, its token ids and
    their logprobs (one per token, each <= 0, or none)."""
    text: str
    tokens: List[int] = field(default_factory=list)
    logprobs: List[float] = field(default_factory=list)
    policy_version: int = 0


@dataclass
class Observation:
    """The environment's answer to an action; ``done`` ends the episode."""
    text: str
    tokens: List[int] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False


class Episode(Protocol):
    def step(self, key: TurnKey, move: Move) -> Observation: ...

    def state(self) -> Optional[bytes]: ...  # an opaque reference restore accepts, or None


class Env(Protocol):
    def reset(self, task: Task) -> Episode: ...

    def restore(self, task: Task, history: List[Turn], state: Optional[bytes]) -> Episode: ...


ActFn = Callable[[List[ActRequest]], Sequence[Union[Move, BaseException]]]
ScoreFn = Callable[[Task, List[Turn]], float]


@dataclass
class WorkerStats:
    leases: int = 0        # branches leased
    turns: int = 0         # turns the server acknowledged
    submits: int = 0       # acknowledged submit requests
    policy_calls: int = 0
    max_batch: int = 0
    lost: int = 0          # branches whose work was refused (lease lost, branch ended) and dropped


class _Branch:
    def __init__(self, lease: Lease):
        self.lease = lease
        self.history: List[Turn] = list(lease.history)
        self.turns: List[Turn] = []
        self.episode: Optional[Episode] = None
        self.ended = False
        self.score: Optional[float] = None
        self.error = ""

    def key(self) -> TurnKey:
        k = self.lease.key
        n = len(self.turns)
        return TurnKey(k.seed, k.step, k.group, k.node, k.branch, k.index + n, k.path + n, k.attempt)


def _transient(e: BaseException) -> bool:
    """The server did not answer, or answered 5xx: retry the same request."""
    if isinstance(e, PatrdbError):
        return e.status >= 500
    return isinstance(e, OSError)


class RolloutWorker:
    """Grows a step's branches: lease up to ``max_branches``, sample their
    intervals with one ``act`` call per round (every branch still sampling),
    step the episodes, score, submit; repeat until the step has no active branch.

    ``act(requests) -> moves`` is your batched policy (one vLLM/SGLang call;
    an exception in place of a move fails that request alone);
    ``env`` has ``reset(task)`` and ``restore(task, history, state)`` returning
    an episode with ``step(key, move) -> Observation`` and ``state()``;
    ``scorer(task, history)`` is the process score in [0,1] (None when the run
    does not score). A failing act, env or scorer call fails only its branch:
    the failure is submitted and the server retries or records it. A refused
    submit (409: the lease was lost) drops the work and leases again; a
    transport error or 5xx is retried with the same client key, so a submit
    the server did commit is answered as before instead of written twice.
    """

    def __init__(self, client: Client, run: str, act: ActFn, env: Env, scorer: Optional[ScoreFn] = None,
                 name: str = "", max_branches: int = 16, ttl_ms: int = 0, poll: float = 0.05,
                 policy_version: int = 0, on_submit: Optional[Callable[[List[Submission], Submitted], None]] = None):
        self.client, self.run_id, self.act, self.env, self.scorer = client, run, act, env, scorer
        self.name = name or new_client_key()[:8]
        self.max_branches, self.ttl_ms, self.poll = max_branches, ttl_ms, poll
        self.policy_version = policy_version
        self.on_submit = on_submit
        self.stats = WorkerStats()

    def run(self, step: int, deadline: Optional[float] = None) -> WorkerStats:
        """Works on ``step`` until it has no active branch (closing the groups is
        the driver's), or until ``deadline`` (a time.monotonic() value)."""
        wait = self.poll
        while deadline is None or time.monotonic() < deadline:
            try:
                leases = self.client.lease(self.run_id, self.name, self.max_branches, step, self.ttl_ms)
                if not leases and self.client.step_status(self.run_id, step).active == 0:
                    return self.stats
            except Exception as e:  # noqa: BLE001 - only transport failures are retried
                if not _transient(e):
                    raise
                time.sleep(wait)
                wait = min(2 * wait, 2.0)
                continue
            wait = self.poll
            if not leases:
                time.sleep(self.poll)  # every free branch is held by another worker
                continue
            self.stats.leases += len(leases)
            self._submit(self._sample(leases))
        raise TimeoutError(f"step {step} of run {self.run_id!r} still has active branches at the deadline")

    def _sample(self, leases: List[Lease]) -> List[_Branch]:
        wave = [_Branch(l) for l in leases]
        for b in wave:
            try:
                l = b.lease
                if not l.history and l.env_state is None:
                    b.episode = self.env.reset(l.task)
                else:
                    b.episode = self.env.restore(l.task, list(l.history), l.env_state)
            except Exception as e:  # noqa: BLE001 - the branch fails, not the worker
                b.error = f"env restore: {e}"
        while True:
            who = [b for b in wave if not b.error and not b.ended and len(b.turns) < b.lease.turns]
            if not who:
                break
            reqs = [ActRequest(b.key(), b.lease.task, b.history) for b in who]
            self.stats.policy_calls += 1
            self.stats.max_batch = max(self.stats.max_batch, len(reqs))
            try:
                moves = list(self.act(reqs))
                if len(moves) != len(reqs):
                    raise ValueError(f"act returned {len(moves)} moves for {len(reqs)} requests")
            except Exception as e:  # noqa: BLE001
                for b in who:
                    b.error = f"policy: {e}"
                continue
            for b, mv in zip(who, moves):
                if isinstance(mv, BaseException):
                    b.error = f"policy: {mv}"
                    continue
                try:
                    obs = b.episode.step(b.key(), mv)
                except Exception as e:  # noqa: BLE001
                    b.error = f"env: {e}"
                    continue
                t = Turn(action=mv.text, observation=obs.text, action_tokens=list(mv.tokens),
                         action_logprobs=list(mv.logprobs), observation_tokens=list(obs.tokens),
                         reward=obs.reward, done=obs.done, policy_version=mv.policy_version or self.policy_version)
                b.turns.append(t)
                b.history = b.history + [t]
                b.ended = obs.done
        for b in wave:
            if b.error or b.ended or not b.lease.score or len(b.turns) != b.lease.turns or self.scorer is None:
                continue
            try:
                s = float(self.scorer(b.lease.task, b.history))
                if not 0.0 <= s <= 1.0:
                    raise ValueError(f"returned {s}, want a score in [0,1]")
                b.score = s
            except Exception as e:  # noqa: BLE001
                b.error = f"scorer: {e}"
        return wave

    def _submit(self, wave: List[_Branch]) -> None:
        subs = []
        for b in wave:
            l = b.lease
            if b.error:
                subs.append(Submission(l.id, l.node, l.from_, error=b.error, worker=self.name))
            elif b.turns or b.score is not None:
                state = b.episode.state() if b.turns else None
                subs.append(Submission(l.id, l.node, l.from_, turns=b.turns, env_state=state, score=b.score, worker=self.name))
        if not subs:
            return
        try:
            self._send(subs)
            return
        except Conflict:
            if len(subs) == 1:
                self.stats.lost += 1
                return
        except BadRequest:
            if len(subs) == 1 and not subs[0].turns:
                raise
        # Sort the refusal out branch by branch: one lost lease must not cost
        # the others their work.
        for s in subs:
            try:
                self._send([s])
            except BadRequest as e:
                if not s.turns:
                    raise
                # The store refused what the policy or env produced: the
                # branch failed like on any other policy or env error.
                try:
                    self._send([Submission(s.lease, s.node, s.from_, error=f"turn: {e.message}", worker=self.name)])
                except Conflict:
                    self.stats.lost += 1
            except Conflict:
                self.stats.lost += 1

    def _send(self, subs: List[Submission]) -> Submitted:
        key = new_client_key()
        wait = self.poll
        while True:
            try:
                out = self.client.submit(self.run_id, subs, client_key=key)
            except Exception as e:  # noqa: BLE001
                if not _transient(e):
                    raise
                time.sleep(wait)
                wait = min(2 * wait, 2.0)
                continue
            self.stats.submits += 1
            self.stats.turns += sum(len(s.turns) for s in subs)
            if self.on_submit:
                self.on_submit(subs, out)
            return out


class StepDriver:
    """The trainer's side of a step: open it, wait while workers grow it, close
    each group as it finishes, and hand back the advantages. Client keys are
    deterministic, so a restarted driver gets the same groups back and never
    closes a group twice."""

    def __init__(self, client: Client, run: str, poll: float = 0.1):
        self.client, self.run_id, self.poll = client, run, poll

    def open(self, step: int, tasks: Sequence[Union[Task, Mapping[str, Any]]],
             tree: Optional[Mapping[str, Any]] = None) -> List[int]:
        """Opens the step (or finds it opened); returns its group ids in task order."""
        res = self.client.open_step(self.run_id, step, tasks, tree=tree, client_key=f"{self.run_id}/step/{step}/open")
        return [g.id for g in res.groups]

    def close_done(self, step: int, shape: Optional[Callable[[int], Mapping[str, Any]]] = None) -> StepStatus:
        """Closes every group of the step that has no active branch left; ``shape(group)``
        may return close_group's shaping arguments (rubric_scores, lambda_, pool)."""
        st = self.client.step_status(self.run_id, step)
        for g in st.done:
            kw = dict(shape(g)) if shape else {}
            self.client.close_group(self.run_id, g, client_key=f"{self.run_id}/group/{g}/close", **kw)
        return st

    def wait(self, step: int, shape: Optional[Callable[[int], Mapping[str, Any]]] = None,
             timeout: Optional[float] = None) -> Dict[int, List[Advantage]]:
        """Closes groups as they finish until none is open; returns each group's
        advantages (one per leaf, leaf id order)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.close_done(step, shape)
            if st.open == len(st.done):  # every open group was just closed
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"step {step}: {st.open} groups open, {st.active} active branches, {st.leased} leased")
            time.sleep(self.poll)
        out: Dict[int, List[Advantage]] = {}
        for a in self.client.advantages(self.run_id, step=step):
            out.setdefault(a.group, []).append(a)
        return out


def drive_step(client: Client, run: str, step: int, tasks: Sequence[Union[Task, Mapping[str, Any]]],
               shape: Optional[Callable[[int], Mapping[str, Any]]] = None, timeout: Optional[float] = None,
               tree: Optional[Mapping[str, Any]] = None, poll: float = 0.1) -> Dict[int, List[Advantage]]:
    """Opens ``step`` with ``tasks``, waits until workers have grown every group,
    closes them, and returns the advantages by group id."""
    d = StepDriver(client, run, poll)
    d.open(step, tasks, tree)
    return d.wait(step, shape, timeout)
