"""The trainer's side of a step: open it, wait while workers (and verifiers)
grow it, close each group as it finishes, and hand back the advantages —
optionally opening more tasks until enough groups are informative."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .client import Client
from .types import Advantage, Group, StepStatus, Task

__all__ = ["StepDriver", "StepAdvantages", "drive_step"]

TaskLike = Union[Task, Mapping[str, Any]]
ShapeFn = Callable[[int], Mapping[str, Any]]
MoreTasksFn = Callable[[int], Optional[Sequence[TaskLike]]]


class StepAdvantages(Dict[int, List[Advantage]]):
    """A step's advantages by group id (one per leaf, leaf id order), and which
    groups were ``informative`` (their outcome rewards varied, before rubric
    shaping) and which were ``filtered`` (zero variance, or no leaf left: they
    teach GRPO nothing), each in group id order. ``tasks`` is every task the
    step was opened with, in order (more than asked for when it was extended).
    Train on ``client.batch(run, step, groups=result.informative)`` to leave
    the filtered groups out."""

    def __init__(self, advantages: Dict[int, List[Advantage]], groups: Sequence[int], tasks: Sequence[Task] = ()):
        super().__init__(advantages)
        self.informative: List[int] = sorted(g for g in groups if _informative(advantages.get(g, [])))
        self.filtered: List[int] = sorted(g for g in groups if not _informative(advantages.get(g, [])))
        self.tasks: List[Task] = list(tasks)


def _informative(advs: Sequence[Advantage]) -> bool:
    return bool(advs) and not advs[0].zero_variance


def _task(t: TaskLike) -> Task:
    if isinstance(t, Task):
        return t
    return Task(id=t.get("id", ""), prompt=t.get("prompt", ""), prompt_tokens=list(t.get("prompt_tokens") or []),
                gold=t.get("gold", ""), meta=dict(t.get("meta") or {}))


def _task_of(g: Group) -> Task:
    return Task(id=g.task, prompt=g.prompt, prompt_tokens=list(g.prompt_tokens), gold=g.gold, meta=dict(g.meta))


class StepDriver:
    """Opens a step, closes each group as it finishes, and hands back the
    advantages. A group finishes when it has no active branch and no leaf
    awaiting its deferred reward: remote scores and deferred rewards hold it
    open until they arrive (or the run's pending timeout fails them). Client
    keys are deterministic, so a restarted driver gets the same groups back and
    never closes a group twice."""

    def __init__(self, client: Client, run: str, poll: float = 0.1):
        self.client, self.run_id, self.poll = client, run, poll

    def open(self, step: int, tasks: Sequence[TaskLike], tree: Optional[Mapping[str, Any]] = None) -> List[int]:
        """Opens the step (or finds it opened); returns its group ids in task order."""
        res = self.client.open_step(self.run_id, step, tasks, tree=tree, client_key=f"{self.run_id}/step/{step}/open")
        return [g.id for g in res.groups]

    def extend(self, step: int, tasks: Sequence[TaskLike], tree: Optional[Mapping[str, Any]] = None) -> List[int]:
        """Opens groups for the tasks past the step's own: ``tasks`` starts with
        the tasks the step was opened with. Returns every group id in task order."""
        key = f"{self.run_id}/step/{step}/open/{len(tasks)}"
        return [g.id for g in self.client.open_step(self.run_id, step, tasks, tree=tree, client_key=key).groups]

    def close_done(self, step: int, shape: Optional[ShapeFn] = None) -> StepStatus:
        """Closes every group of the step that has nothing left to wait for;
        ``shape(group)`` may return close_group's shaping arguments
        (rubric_scores, lambda_, pool). Returns the status read before closing."""
        return self._close_done(step, shape)[0]

    def _close_done(self, step: int, shape: Optional[ShapeFn],
                    filter: bool = False) -> Tuple[StepStatus, Dict[int, bool]]:
        """close_done, and whether each group it closed was informative;
        ``filter`` records the groups without a gradient as filtered."""
        st = self.client.step_status(self.run_id, step)
        closed: Dict[int, bool] = {}
        for g in st.done:
            kw = dict(shape(g)) if shape else {}
            res = self.client.close_group(self.run_id, g, client_key=f"{self.run_id}/group/{g}/close",
                                          filter=filter, **kw)
            closed[g] = _informative(res.advantages)
        return st, closed

    def wait(self, step: int, shape: Optional[ShapeFn] = None, timeout: Optional[float] = None) -> StepAdvantages:
        """Closes groups as they finish until none is open; returns each group's
        advantages (a dict by group id, with ``informative`` and ``filtered``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.close_done(step, shape)
            if st.open == len(st.done):  # every open group was just closed
                break
            self._check(step, st, deadline)
            time.sleep(self.poll)
        return self.advantages(step)

    def advantages(self, step: int, tasks: Sequence[Task] = ()) -> StepAdvantages:
        """The step's advantages by group, with which groups were informative."""
        out: Dict[int, List[Advantage]] = {}
        for a in self.client.advantages(self.run_id, step=step):
            out.setdefault(a.group, []).append(a)
        groups = [g.id for g in self.client.groups(self.run_id, step) if g.status == "closed"]
        return StepAdvantages(out, groups, tasks)

    def _check(self, step: int, st: StepStatus, deadline: Optional[float]) -> None:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"step {step}: {st.open} groups open, {st.active} active branches, {st.leased} leased, "
                               f"{st.awaiting_scores} awaiting a remote score, {st.awaiting_rewards} awaiting a reward")

    def drive(self, step: int, tasks: Sequence[TaskLike], informative: int = 0,
              more_tasks: Optional[MoreTasksFn] = None, shape: Optional[ShapeFn] = None,
              timeout: Optional[float] = None, tree: Optional[Mapping[str, Any]] = None,
              max_tasks: int = 0) -> StepAdvantages:
        """Opens ``step`` with ``tasks`` and closes its groups as they finish.
        With ``informative`` N (dynamic sampling, the rule of the Go engine's
        RolloutInformative), whenever the groups closed informative plus those
        still open fall short of N — a group closed with zero outcome variance,
        or every branch failed — it asks ``more_tasks(k)`` for up to k more
        tasks and extends the step with them (the step's tasks, then the new
        ones), until N groups closed informative, ``more_tasks`` gives fewer
        than asked for (it has no more), or ``max_tasks`` are open (default
        8 N). It opens no task it does not need if every open group turns out
        informative. The filtered groups stay closed on record with their
        zero-variance flag and a ``group.filter`` event, as the Go engine
        records them; the answer lists them apart.

        A restarted driver passes the same first tasks: the step's recorded
        tasks (an extension included) are taken up again, so nothing is
        opened twice. ``more_tasks`` should give the same tasks again for a
        step driven again (a dataset iterator keyed by step)."""
        if informative < 0 or max_tasks < 0:
            raise ValueError(f"informative {informative} and max_tasks {max_tasks} must be >= 0")
        if informative and more_tasks is not None and not max_tasks:
            max_tasks = 8 * informative
        want = [_task(t) for t in tasks]
        recorded = [_task_of(g) for g in self.client.groups(self.run_id, step)]
        if len(recorded) > len(want) and recorded[:len(want)] == want:
            want = recorded  # a restarted driver: the step was extended before
            self.extend(step, want, tree)
        else:
            self.open(step, want, tree)
        deadline = None if timeout is None else time.monotonic() + timeout
        exhausted = not informative or more_tasks is None
        seen: Dict[int, bool] = {}  # closed group -> informative
        while True:
            st, closed = self._close_done(step, shape, filter=informative > 0)
            seen.update(closed)
            if informative and len(seen) < st.closed + len(st.done):
                seen = self._flags(step)  # closed before this driver looked (a restart)
            undecided = st.open - len(st.done)
            need = min(informative - sum(seen.values()) - undecided, max_tasks - len(want))
            if need > 0 and not exhausted:
                more = [_task(t) for t in (more_tasks(need) or [])][:need]  # type: ignore[misc]
                exhausted = len(more) < need
                if more:
                    want = want + more
                    self.extend(step, want, tree)
                    continue
            if undecided == 0:
                break
            self._check(step, st, deadline)
            time.sleep(self.poll)
        return self.advantages(step, want)

    def _flags(self, step: int) -> Dict[int, bool]:
        """Whether each closed group of the step was informative."""
        res = self.advantages(step)
        return {g: g in res.informative for g in res.informative + res.filtered}


def drive_step(client: Client, run: str, step: int, tasks: Sequence[TaskLike], shape: Optional[ShapeFn] = None,
               timeout: Optional[float] = None, tree: Optional[Mapping[str, Any]] = None, poll: float = 0.1,
               informative: int = 0, more_tasks: Optional[MoreTasksFn] = None, max_tasks: int = 0) -> StepAdvantages:
    """Opens ``step`` with ``tasks``, waits until workers have grown every group,
    closes them, and returns the advantages by group id. With ``informative``
    N it opens further tasks from ``more_tasks(k)`` until N groups closed with
    non-zero outcome variance (StepDriver.drive)."""
    return StepDriver(client, run, poll).drive(step, tasks, informative, more_tasks, shape, timeout, tree, max_tasks)
