"""A verifier: serves a step's work that waits for someone other than its
workers — deferred outcome rewards (a test-suite verifier, a remote reward
model) and remote process scores (a remote process reward model) — from any
process, as many of them as you like."""

from __future__ import annotations

import concurrent.futures as cf
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Set, Tuple, Union

from .client import BadRequest, Client, Conflict, PatrdbError, new_client_key
from .types import PendingWork, RewardSubmission, ScoreSubmission, Task, Turn

__all__ = ["Verifier", "VerifierStats"]

RewardFn = Callable[[Task, List[Turn]], float]
ScoreFn = Callable[[Task, List[Turn]], float]


@dataclass
class VerifierStats:
    rewards: int = 0   # rewards the server accepted
    scores: int = 0    # process scores the server accepted
    errors: int = 0    # of those, reward_fn or score_fn failures delivered as errors
    submits: int = 0   # acknowledged requests
    refused: int = 0   # results refused and dropped (another verifier was first, or the wait timed out)


_Key = Tuple[str, int, int, int]  # kind, node, interval, attempt
_Item = Union[RewardSubmission, ScoreSubmission]


def _transient(e: BaseException) -> bool:
    if isinstance(e, PatrdbError):
        return e.status >= 500
    return isinstance(e, OSError)


class Verifier:
    """Serves a step's pending work: polls ``client.pending(run, step)``,
    computes ``reward_fn(task, history)`` for each finished branch awaiting its
    outcome reward (workers with ``defer_rewards``) and ``score_fn(task,
    history)`` — a process score in [0,1] — for each branch awaiting a remote
    score (runs with ``remote_scores``), up to ``concurrency`` calls at once,
    and submits the results as they come, under client keys. ``history`` is
    the branch's whole path, root first, read once per branch (the list is
    polled without the paths, which for a step of long trajectories are
    large). ``reward_fn`` and ``score_fn`` run on ``concurrency`` threads.

    A function that raises (or returns a reward that is not finite, a score
    outside [0,1]) delivers an error instead: the leaf is recorded failed —
    never given 0 — or the branch's scoring fails and the server retries it.
    A result the server refuses because the branch no longer waits for it
    (another verifier was first, or the run's pending timeout gave up on it)
    is dropped. Any number of verifiers may serve the same step.
    """

    def __init__(self, client: Client, run: str, reward_fn: Optional[RewardFn] = None,
                 score_fn: Optional[ScoreFn] = None, concurrency: int = 8, poll: float = 0.05):
        if reward_fn is None and score_fn is None:
            raise ValueError("a Verifier needs a reward_fn, a score_fn or both")
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: want >= 1")
        self.client, self.run_id = client, run
        self.reward_fn, self.score_fn = reward_fn, score_fn
        self.concurrency, self.poll = concurrency, poll
        self.stats = VerifierStats()

    def run(self, step: int, deadline: Optional[float] = None, until: Optional[threading.Event] = None) -> VerifierStats:
        """Serves ``step`` until it has nothing pending for this verifier and no
        active branch left (its workers are through), or until ``deadline`` (a
        time.monotonic() value: then TimeoutError). With ``until``, a finished
        step is waited on until the event is set (a driver may extend it)."""
        pool = cf.ThreadPoolExecutor(self.concurrency, thread_name_prefix="patrdb-verify")
        try:
            return self._run(pool, step, deadline, until)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # past a deadline, calls still running are left be

    def _run(self, pool: cf.ThreadPoolExecutor, step: int, deadline: Optional[float],
             until: Optional[threading.Event]) -> VerifierStats:
        running: Dict[cf.Future, _Key] = {}
        seen: Set[_Key] = set()  # listed and taken on; forgotten once no longer listed
        wait = self.poll
        while True:
            self._left(step, deadline)
            try:
                # The list alone, polled often; each branch's path is read
                # once, when its computation starts.
                p = self.client.pending(self.run_id, step, history=False)
            except Exception as e:  # noqa: BLE001
                if not _transient(e):
                    raise
                self._sleep(wait, deadline)
                wait = min(2 * wait, 2.0)
                continue
            wait = self.poll
            listed: Set[_Key] = set()
            for kind, fn, items in (("reward", self.reward_fn, p.rewards), ("score", self.score_fn, p.scores)):
                if fn is None:
                    continue
                for w in items:
                    k = (kind, w.node, w.interval if kind == "score" else 0, w.attempt)
                    listed.add(k)
                    if k not in seen:
                        seen.add(k)
                        running[pool.submit(self._compute, kind, fn, w)] = k
            seen &= listed | set(running.values())
            if not running:
                if not listed and self._finished(step) and (until is None or until.is_set()):
                    return self.stats
                self._sleep(self.poll, deadline)
                continue
            # With every slot busy, new work could not start anyway: wait for
            # a result rather than list the pending work again.
            left = self._left(step, deadline)
            timeout = None if len(running) >= self.concurrency else self.poll
            if left is not None:
                timeout = left if timeout is None else min(timeout, left)
            done, _ = cf.wait(running, timeout=timeout, return_when=cf.FIRST_COMPLETED)
            results = []
            for f in done:
                k = running.pop(f)
                r = f.result()
                if r is None:
                    seen.discard(k)  # its path could not be read: taken on again at the next look
                else:
                    results.append(r)
            self._submit([r for r in results if isinstance(r, RewardSubmission)], deadline)
            self._submit([r for r in results if isinstance(r, ScoreSubmission)], deadline)

    def _finished(self, step: int) -> bool:
        """The step has no active branch, nor a leaf awaiting a reward this
        verifier would deliver."""
        try:
            st = self.client.step_status(self.run_id, step)
        except Exception as e:  # noqa: BLE001
            if not _transient(e):
                raise
            return False
        return st.active == 0 and (self.reward_fn is None or st.awaiting_rewards == 0)

    def _compute(self, kind: str, fn: Callable[[Task, List[Turn]], float], w: PendingWork) -> Optional[_Item]:
        """The reward or score of w, or its error; None when its path could not
        be read (the server did not answer)."""
        try:
            history = [t.turn() for t in self.client.trajectory(self.run_id, w.node).turns]
        except Exception as e:  # noqa: BLE001
            if _transient(e):
                return None
            raise
        try:
            v = float(fn(w.task, history))
            if kind == "score" and not 0.0 <= v <= 1.0:
                raise ValueError(f"returned {v} for node {w.node}, want a score in [0,1]")
            if kind == "reward" and not math.isfinite(v):
                raise ValueError(f"returned {v} for node {w.node}, want a finite reward")
        except Exception as e:  # noqa: BLE001 - delivered as the branch's error
            msg = str(e) or type(e).__name__
            if kind == "reward":
                return RewardSubmission(w.node, error=msg)
            return ScoreSubmission(w.node, w.interval, error=msg)
        if kind == "reward":
            return RewardSubmission(w.node, reward=v)
        return ScoreSubmission(w.node, w.interval, score=v)

    def _submit(self, items: List[_Item], deadline: Optional[float]) -> None:
        """Submits items in one request; a refused request is sorted out item by
        item, so one late result does not cost the others theirs. A result the
        server finds malformed (BadRequest) is a bug, raised."""
        if not items:
            return
        try:
            self._send(items, deadline)
            return
        except Conflict:
            if len(items) == 1:
                self.stats.refused += 1
                return
        except BadRequest:
            if len(items) == 1:
                raise
        for it in items:
            try:
                self._send([it], deadline)
            except Conflict:
                self.stats.refused += 1

    def _send(self, items: List[_Item], deadline: Optional[float]) -> None:
        """One request under one client key, retrying transport failures and 5xx
        with that key until the server answers (or the deadline)."""
        key = new_client_key()
        wait = self.poll
        while True:
            try:
                if isinstance(items[0], RewardSubmission):
                    self.client.submit_rewards(self.run_id, items, client_key=key)  # type: ignore[arg-type]
                else:
                    self.client.submit_scores(self.run_id, items, client_key=key)  # type: ignore[arg-type]
                break
            except Exception as e:  # noqa: BLE001
                if not _transient(e):
                    raise
                self._sleep(wait, deadline)
                wait = min(2 * wait, 2.0)
        self.stats.submits += 1
        for it in items:
            if isinstance(it, RewardSubmission):
                self.stats.rewards += 1
            else:
                self.stats.scores += 1
            self.stats.errors += bool(it.error)

    def _left(self, step: int, deadline: Optional[float]) -> Optional[float]:
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"step {step} of run {self.run_id!r} still has pending work at the deadline")
        return left

    def _sleep(self, d: float, deadline: Optional[float]) -> None:
        left = None if deadline is None else deadline - time.monotonic()
        time.sleep(d if left is None else max(0.0, min(d, left)))
