"""The sampling loop of a RolloutWorker, the same one the Go worker and the
in-process engine run: each leased branch advances on a thread of its own —
restore, then turn after turn (a policy move, an env step), then its process
score — while the policy is asked for many branches' moves at once. A branch
waits for nothing but its own env and the next policy call, so one slow tool
call holds up its branch alone.

A policy batch goes out as soon as waiting longer cannot grow it — every
sampling branch waits for a move, or ``max_batch`` requests are queued — or
when the oldest request has waited ``linger`` seconds while other branches
still step their envs. A larger queue is split into calls of at most
``max_batch`` requests, issued concurrently (several inference replicas serve
them at once), at most ``max_calls`` at a time when that is set (1 for a
policy that is not safe for concurrent calls). Restores, env steps and scorer
calls run at most ``concurrency`` at a time.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Optional, Protocol, Sequence, Union

from .types import Lease, Task, Turn, TurnKey

__all__ = ["ActRequest", "Move", "Observation", "Episode", "Env", "ActFn", "ScoreFn"]


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
    their logprobs (one per token, each <= 0, or none), and the version of the
    weights that sampled it (0: the worker's ``policy_version``)."""
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


class Branch:
    """One leased interval being sampled. ``history`` is the path so far (the
    lease's, then the turns sampled); after sampling, ``turns`` hold what was
    sampled, ``ended`` says the episode ended, ``score`` is the process score
    when the lease asked for one, and ``error`` why the branch failed (to be
    submitted as its failure). ``cancel`` stops it: a lost lease, or the worker
    ending; a cancelled branch records no failure of its own."""

    def __init__(self, lease: Lease):
        self.lease = lease
        self.history: List[Turn] = list(lease.history)
        self.turns: List[Turn] = []
        self.episode: Optional[Episode] = None
        self.ended = False
        self.score: Optional[float] = None
        self.error = ""
        self.sent = 0        # turns already submitted (each_turn)
        self.lost = False    # counted as lost
        self.cancelled = False
        self._wake = threading.Event()  # a move arrived, or the branch was cancelled

    def key(self) -> TurnKey:
        """The TurnKey of the branch's next turn."""
        k = self.lease.key
        n = len(self.turns)
        return TurnKey(k.seed, k.step, k.group, k.node, k.branch, k.index + n, k.path + n, k.attempt)

    def cancel(self) -> None:
        self.cancelled = True
        self._wake.set()

    def fail(self, what: str, e: BaseException) -> None:
        """Records e as the branch's failure, unless it was cancelled (then the
        failure is the cancellation's, not the branch's)."""
        if not self.cancelled:
            self.error = f"{what}: {e}"


class _Pending:
    """A request queued for the next policy batch. Compared by identity."""
    __slots__ = ("req", "branch", "done", "move", "err")

    def __init__(self, req: ActRequest, branch: Branch):
        self.req, self.branch = req, branch
        self.done = False
        self.move: Any = None
        self.err: Optional[BaseException] = None


@dataclass
class SamplerStats:
    """What a sampler did, updated under its lock."""
    turns: int = 0
    policy_calls: int = 0
    max_batch: int = 0  # the most requests one policy call carried


class Sampler:
    """Runs the sampling loop for every branch started on it; safe for use by
    several threads. ``on_call(n)`` sees each policy call of n requests as it
    is issued; ``version()`` is the policy version recorded on a turn whose
    move carries none."""

    def __init__(self, act: ActFn, env: Env, scorer: Optional[ScoreFn], max_batch: int = 0, concurrency: int = 8,
                 linger: float = 0.005, version: Callable[[], int] = lambda: 0,
                 on_call: Optional[Callable[[int], None]] = None, max_calls: int = 0):
        if max_batch < 0 or concurrency < 1 or linger < 0 or max_calls < 0:
            raise ValueError(f"max_batch {max_batch} and max_calls {max_calls} must be >= 0, concurrency {concurrency} "
                             f">= 1, linger {linger} >= 0")
        self.act, self.env, self.scorer = act, env, scorer
        self.max_batch, self.max_calls, self.linger, self.version = max_batch, max_calls, linger, version
        self.on_call = on_call
        self.stats = SamplerStats()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._cv = threading.Condition()
        self._queue: List[_Pending] = []
        self._first = 0.0     # when the oldest queued request was queued
        self._sampling = 0    # branches started and not yet through their turns
        self._waiting = 0     # of those, how many wait for a move (queued or in a call)
        self._calls = 0       # policy calls in flight
        self._closed = False
        self._lingerer = threading.Thread(target=self._linger_loop, name="patrdb-linger", daemon=True)
        self._lingerer.start()

    def close(self) -> None:
        """Stops the linger thread; branches still sampling run on."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def start(self, branches: Sequence[Branch], done: Callable[[Branch], None],
              on_turn: Optional[Callable[[Branch, Turn], None]] = None) -> None:
        """Samples each branch on a thread of its own and calls ``done(branch)``
        from that thread when it is through (always, whatever happened).
        Branches started together share their first policy batch: they all count
        as sampling before any of them asks for a move. ``on_turn(branch, turn)``
        sees each turn as it is sampled, on the branch's thread; an exception it
        raises fails the branch."""
        with self._cv:
            self._sampling += len(branches)
        for b in branches:
            threading.Thread(target=self._run, args=(b, done, on_turn), name=f"patrdb-branch-{b.lease.node}",
                             daemon=True).start()

    # ---- one branch ----

    def _run(self, b: Branch, done: Callable[[Branch], None], on_turn: Optional[Callable[[Branch, Turn], None]]) -> None:
        try:
            try:
                self._turns(b, on_turn)
            finally:
                with self._cv:
                    self._sampling -= 1
                    self._dispatch_if_ready()
            if not b.error and not b.cancelled and self._wants_score(b):
                with self._slot(b) as ok:
                    if ok:
                        self._score(b)
        except BaseException as e:  # noqa: BLE001 - a bug here fails the branch, never hangs the worker
            b.fail("worker", e)
        finally:
            done(b)

    def _wants_score(self, b: Branch) -> bool:
        """b is scored here: its lease asks for a score, it sampled its whole
        interval without ending, and there is a scorer."""
        return b.lease.score and not b.ended and len(b.turns) == b.lease.turns and self.scorer is not None

    def _score(self, b: Branch) -> None:
        try:
            s = float(self.scorer(b.lease.task, b.history))  # type: ignore[misc]
        except Exception as e:  # noqa: BLE001 - the branch fails, not the worker
            b.fail("scorer", e)
            return
        if not 0.0 <= s <= 1.0:  # NaN fails too
            b.fail("scorer", ValueError(f"returned {s} for node {b.lease.node}, want a score in [0,1]"))
            return
        b.score = s

    @contextmanager
    def _slot(self, b: Branch) -> Iterator[bool]:
        """Holds one of the concurrency slots; yields False when b was cancelled
        while it waited (do nothing then)."""
        self._slots.acquire()
        try:
            yield not b.cancelled
        finally:
            self._slots.release()

    def _turns(self, b: Branch, on_turn: Optional[Callable[[Branch, Turn], None]]) -> None:
        """Restores b's episode and samples its turns."""
        l = b.lease
        if b.episode is None and l.turns > 0:
            with self._slot(b) as ok:
                if not ok:
                    return
                try:
                    if not l.history and l.env_state is None:
                        b.episode = self.env.reset(l.task)
                    else:
                        b.episode = self.env.restore(l.task, list(l.history), l.env_state)
                except Exception as e:  # noqa: BLE001
                    b.fail("env restore", e)
                    return
        while len(b.turns) < l.turns and not b.ended and not b.cancelled:
            key = b.key()
            try:
                mv = self._act(b, ActRequest(key, l.task, b.history))
            except BaseException as e:  # noqa: BLE001 - an exception in place of a move fails its branch
                b.fail("policy", e)
                return
            if mv is None:
                return  # cancelled
            with self._slot(b) as ok:
                if not ok:
                    return
                try:
                    obs = b.episode.step(key, mv)  # type: ignore[union-attr]
                except Exception as e:  # noqa: BLE001
                    b.fail("env", e)
                    return
            try:
                t = Turn(action=mv.text, observation=obs.text, action_tokens=list(mv.tokens),
                         action_logprobs=list(mv.logprobs), observation_tokens=list(obs.tokens),
                         reward=obs.reward, done=bool(obs.done),
                         policy_version=getattr(mv, "policy_version", 0) or self.version())
            except Exception as e:  # noqa: BLE001 - a move or observation of the wrong shape
                b.fail("policy", ValueError(f"cannot make a turn of move {mv!r} and observation {obs!r}: {e}"))
                return
            b.turns.append(t)
            b.history = b.history + [t]
            b.ended = t.done
            with self._cv:
                self.stats.turns += 1
            if on_turn is not None:
                try:
                    on_turn(b, t)
                except Exception as e:  # noqa: BLE001
                    b.fail("env", e)
                    return

    # ---- policy batches ----

    def _act(self, b: Branch, req: ActRequest) -> Optional[Move]:
        """Queues req for the next policy batch and waits for its move (None:
        the branch was cancelled meanwhile)."""
        p = _Pending(req, b)
        b._wake.clear()
        with self._cv:
            if b.cancelled:
                return None
            if not self._queue:
                self._first = time.monotonic()
            self._queue.append(p)
            self._waiting += 1
            self._dispatch_if_ready()
            self._cv.notify_all()  # the linger thread times the new queue
        b._wake.wait()
        if p.done:
            if p.err is not None:
                raise p.err
            return p.move
        with self._cv:  # cancelled: take the request back if it was not sent yet
            if p in self._queue:
                self._queue.remove(p)
                self._waiting -= 1
        return None

    def _dispatch_if_ready(self) -> None:
        """Sends the queue when waiting longer cannot grow the batch: every
        sampling branch waits for a move, or a full batch is queued. Holds _cv."""
        full = self.max_batch > 0 and len(self._queue) >= self.max_batch
        if self._queue and (full or self._waiting >= self._sampling):
            self._dispatch()

    def _dispatch(self) -> None:
        """Sends every queued request, in calls of at most max_batch, each call
        on a thread of its own; with max_calls calls in flight, the rest wait
        for one to end. Holds _cv."""
        while self._queue and not self._busy():
            n = len(self._queue) if self.max_batch == 0 else min(len(self._queue), self.max_batch)
            batch, self._queue = self._queue[:n], self._queue[n:]
            self._calls += 1
            self.stats.policy_calls += 1
            self.stats.max_batch = max(self.stats.max_batch, n)
            if self.on_call is not None:
                self.on_call(n)
            threading.Thread(target=self._call, args=(batch,), name="patrdb-act", daemon=True).start()

    def _busy(self) -> bool:
        """max_calls policy calls are in flight. Holds _cv."""
        return self.max_calls > 0 and self._calls >= self.max_calls

    def _linger_loop(self) -> None:
        with self._cv:
            while not self._closed:
                if not self._queue or self._busy():
                    self._cv.wait()  # a request queued, or a call ended
                    continue
                left = self._first + self.linger - time.monotonic()
                if left <= 0:
                    self._dispatch()
                else:
                    self._cv.wait(left)

    def _call(self, batch: List[_Pending]) -> None:
        """Asks the policy for one batch and hands each request its move, or its
        error (an exception in place of a move fails that request alone; one the
        call raises fails them all)."""
        reqs = [p.req for p in batch]
        err: Optional[BaseException] = None
        moves: List[Any] = []
        try:
            moves = list(self.act(reqs))
            if len(moves) != len(reqs):
                raise ValueError(f"act returned {len(moves)} moves for {len(reqs)} requests")
        except BaseException as e:  # noqa: BLE001
            err = e
        with self._cv:
            self._waiting -= len(batch)
            self._calls -= 1
            if self._queue:  # requests that waited for this call to end
                self._dispatch()
        for i, p in enumerate(batch):
            if err is not None:
                p.err = err
            elif isinstance(moves[i], BaseException):
                p.err = moves[i]
            else:
                p.move = moves[i]
            p.done = True
            p.branch._wake.set()
