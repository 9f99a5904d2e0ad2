"""Rollout workers over the server's lease protocol.

The server keeps every PaTR rule: which branch needs how many turns, when a
score is due, routing, failures, advantages. A worker only leases branches,
samples them with your batched policy, steps your environments, scores, and
submits; it keeps no state between leases, so any number of workers (threads
or processes, on any machines) can grow the same step, and any of them can
die: its leases expire and go to another worker, which samples again from the
last committed turn.
"""

from __future__ import annotations

import collections

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from .client import BadRequest, Client, Conflict, PatrdbError, new_client_key
from .driver import StepAdvantages, StepDriver, drive_step
from .sampler import ActFn, ActRequest, Branch, Env, Episode, Move, Observation, Sampler, ScoreFn
from .types import Lease, Submission, Submitted, Turn

__all__ = ["ActRequest", "Move", "Observation", "Episode", "Env", "RolloutWorker", "WorkerStats", "StepDriver",
           "StepAdvantages", "drive_step", "DEFAULT_LEASE_TTL_MS", "heartbeat_every"]

# The server's lease TTL when a worker asks for none: long enough that a
# missed heartbeat costs nothing, short enough that a dead worker's branches
# go to another within seconds.
DEFAULT_LEASE_TTL_MS = 30_000


def heartbeat_every(ttl_ms: int) -> float:
    """Seconds between a worker's renewals of leases of ``ttl_ms``: 0.4 TTL,
    so one lost renewal costs nothing and a dead worker's branches are handed
    on within three heartbeats (the TTL plus the server's grace of at most
    0.1 TTL is less than 3 × 0.4 TTL)."""
    return 0.4 * ttl_ms / 1000.0


@dataclass
class WorkerStats:
    leases: int = 0        # branches leased
    turns: int = 0         # turns the server acknowledged
    submits: int = 0       # acknowledged submit requests
    policy_calls: int = 0
    max_batch: int = 0     # the most requests one policy call carried
    lost: int = 0          # branches whose work was refused or whose lease was lost, and dropped
    renewals: int = 0      # heartbeats the server answered


def _transient(e: BaseException) -> bool:
    """The server did not answer, or answered 5xx: retry the same request."""
    if isinstance(e, PatrdbError):
        return e.status >= 500
    return isinstance(e, OSError)


class RolloutWorker:
    """Grows a step's branches: leases up to ``max_branches`` and advances each
    on its own — a policy move, an env step, turn after turn, then its process
    score — submitting each branch as soon as it is through its interval and
    leasing more as room frees up. While a branch's tool runs, a heartbeat
    renews its lease every 0.4 TTL, so a TTL of tens of seconds outlives tool
    calls of minutes, and a dead worker's branches return within about a TTL.

    ``act(requests) -> moves`` is your batched policy (one vLLM/SGLang call;
    an exception in place of a move fails that request alone). It is called
    for every branch waiting for a move at once: a call goes out when every
    sampling branch waits, ``max_batch`` requests are queued, or the oldest
    has waited ``linger`` seconds; a larger batch is split into calls of at
    most ``max_batch`` issued concurrently (several inference replicas). A
    branch that finishes waits up to the same ``linger`` for the others still
    out, so branches that finish together go in one submit and one fsync.
    ``act``
    is called from several threads at once unless ``max_calls`` bounds the
    calls in flight (1 for a policy that is not safe for concurrent calls,
    such as an in-process vllm.LLM).
    ``env`` has ``reset(task)`` and ``restore(task, history, state)`` returning
    an episode with ``step(key, move) -> Observation`` and ``state()``;
    ``scorer(task, history)`` is the process score in [0,1] (None when the run
    does not score, or a remote scorer does: see Verifier). Restores, env steps
    and scorer calls run on the branches' threads, at most ``concurrency`` at a
    time (default ``max_branches``): ``env`` and ``scorer`` must be safe for
    concurrent use; an episode is used by one thread at a time.

    ``name`` is required: a lease is bound to the worker that took it, and
    every submission, renewal and release names it. ``policy_version`` is the
    version of the weights the worker samples with, sent with its lease
    requests and recorded on turns whose move carries none; set it when the
    worker loads new weights. A worker further behind the run's published
    version than its max_staleness is refused: ``run`` raises Conflict
    ("stale").

    ``each_turn`` submits every turn as it is sampled (durable at once, and a
    sign of life), not only each branch's whole interval. ``defer_rewards``
    ends each branch with its outcome reward pending, for a Verifier (or any
    process) to deliver with ``Client.submit_rewards``.

    A failing act, env or scorer call fails only its branch: the failure is
    submitted and the server retries or records it. A refused submit (409:
    the lease was lost) drops the branch's work and leases again; a transport
    error or 5xx is retried with the same client key, so a submit the server
    did commit is answered as before instead of written twice.
    """

    def __init__(self, client: Client, run: str, act: ActFn, env: Env, scorer: Optional[ScoreFn] = None,
                 name: str = "", max_branches: int = 16, ttl_ms: int = 0, poll: float = 0.05,
                 policy_version: int = 0, on_submit: Optional[Callable[[List[Submission], Submitted], None]] = None,
                 concurrency: int = 0, max_batch: int = 0, linger: float = 0.005, each_turn: bool = False,
                 defer_rewards: bool = False, max_calls: int = 0):
        if not name:
            raise ValueError("a RolloutWorker needs a name: leases are bound to the worker that took them")
        if min(max_branches, concurrency, max_batch, max_calls, ttl_ms, linger) < 0:
            raise ValueError("max_branches, concurrency, max_batch, max_calls, ttl_ms and linger must be >= 0")
        self.client, self.run_id, self.act, self.env, self.scorer = client, run, act, env, scorer
        self.name = name
        self.max_branches, self.ttl_ms, self.poll = max_branches, ttl_ms, poll
        self.concurrency = concurrency or max_branches or 64
        self.max_batch, self.max_calls, self.linger = max_batch, max_calls, linger
        self.each_turn, self.defer_rewards = each_turn, defer_rewards
        self.policy_version = policy_version
        self.on_submit = on_submit
        self.stats = WorkerStats()

    def run(self, step: int, deadline: Optional[float] = None, until: Optional[threading.Event] = None) -> WorkerStats:
        """Works on ``step`` until it has no active branch (closing the groups is
        the driver's), or until ``deadline`` (a time.monotonic() value: then
        TimeoutError). With ``until``, a step without active branches is waited
        on until the event is set (a driver that may still extend the step for
        more informative groups sets it when it returns). On return it releases
        every lease it still holds, so another worker takes them at once."""
        s = _Session(self, step, deadline, until)
        try:
            return s.run()
        finally:
            s.stop()


class _Session:
    """One RolloutWorker.run call."""

    def __init__(self, w: RolloutWorker, step: int, deadline: Optional[float], until: Optional[threading.Event]):
        self.w, self.step, self.deadline, self.until = w, step, deadline, until
        self.stats = stats = w.stats

        def on_call(n: int) -> None:  # not a method: the sampler must not hold the session (a cycle)
            stats.policy_calls += 1
            stats.max_batch = max(stats.max_batch, n)

        self.sampler = Sampler(w.act, w.env, w.scorer, max_batch=w.max_batch, concurrency=w.concurrency,
                               linger=w.linger, version=lambda: w.policy_version, on_call=on_call,
                               max_calls=w.max_calls)
        self.reports: "queue.Queue[Tuple[Branch, Optional[Turn], Optional[bytes]]]" = queue.Queue()
        self.quit = threading.Event()
        self.lock = threading.Lock()
        self.held: Dict[str, Branch] = {}  # lease id -> branch
        # Paths of the branches this worker grew last (the loop's alone): the
        # server sends only what is past them (Client.lease's have).
        self.paths: "collections.OrderedDict[int, List[Turn]]" = collections.OrderedDict()
        self.path_limit = 4 * max(w.max_branches, 16)
        self.heart = threading.Thread(target=self._heartbeat, name=f"patrdb-heartbeat-{w.name}", daemon=True)
        self.heart.start()

    # ---- the loop ----

    def left(self) -> Optional[float]:
        """Seconds to the deadline (None: no deadline); TimeoutError past it."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"step {self.step} of run {self.w.run_id!r} still has active branches at the deadline")
        return left

    def sleep(self, d: float) -> None:
        left = self.left()
        time.sleep(d if left is None else min(d, left))

    def run(self) -> WorkerStats:
        w = self.w
        wait = w.poll
        while True:
            self.left()
            cap = w.max_branches
            room = cap == 0 or len(self.held) < cap
            if room:
                try:
                    grants = w.client.lease(w.run_id, w.name, cap - len(self.held) if cap else 0, self.step, w.ttl_ms,
                                            policy_version=w.policy_version,
                                            have=[(n, len(p)) for n, p in self.paths.items()])
                except Exception as e:  # noqa: BLE001 - only transport failures are retried
                    if not _transient(e):
                        raise
                    self.sleep(wait)
                    wait = min(2 * wait, 2.0)
                    continue
                wait = w.poll
                self.begin(grants)
            if not self.held:
                try:
                    if w.client.step_status(w.run_id, self.step).active == 0 and (
                            self.until is None or self.until.is_set()):
                        return self.stats
                except Exception as e:  # noqa: BLE001
                    if not _transient(e):
                        raise
                self.sleep(w.poll)  # every free branch is held by another worker, or awaits a remote score
                continue
            # Wait for news; with room for more branches, only for a poll, then
            # ask again: a branch another worker gives back (or whose lease ran
            # out) is taken while the held ones run long tool calls.
            timeout = w.poll if room else None
            left = self.left()
            if left is not None:
                timeout = left if timeout is None else min(timeout, left)
            try:
                got = [self.reports.get(timeout=timeout)]
            except queue.Empty:
                continue
            self.submit(self.gather(got))

    def gather(self, got: List[Tuple[Branch, Optional[Turn], Optional[bytes]]]
               ) -> List[Tuple[Branch, Optional[Turn], Optional[bytes]]]:
        """Adds to ``got`` the reports that arrive within the worker's linger
        while branches it holds are still out, then whatever is queued:
        branches that finish together (their moves came from one policy call)
        go in one submit, which the server commits with one fsync, not one
        each — as the Go client's Worker does."""
        with self.lock:
            out = len(self.held)
        out -= sum(1 for _, turn, _ in got if turn is None)
        end = time.monotonic() + self.w.linger
        while out > 0:
            left = end - time.monotonic()
            if left <= 0:
                break
            try:
                r = self.reports.get(timeout=left)
            except queue.Empty:
                break
            got.append(r)
            if r[1] is None:
                out -= 1
        while True:
            try:
                got.append(self.reports.get_nowait())
            except queue.Empty:
                return got

    def begin(self, grants: List[Lease]) -> None:
        """Starts sampling the granted branches."""
        if not grants:
            return
        self.stats.leases += len(grants)
        for g in grants:
            if g.history_of:  # the server sent only the turns past the path held
                g.history = self.paths[g.history_of][:g.history_from] + list(g.history)
        bs = [Branch(g) for g in grants]
        with self.lock:
            for b in bs:
                self.held[b.lease.id] = b
        on_turn = self.on_turn if self.w.each_turn else None
        self.sampler.start(bs, lambda b: self.reports.put((b, None, None)), on_turn)

    def on_turn(self, b: Branch, t: Turn) -> None:
        """each_turn: reports a turn with the episode's state after it."""
        self.reports.put((b, t, b.episode.state() if b.episode is not None else None))

    # ---- submits ----

    def submit(self, reports: List[Tuple[Branch, Optional[Turn], Optional[bytes]]]) -> None:
        """Sends what the reports carry in one request: each turn reported
        (each_turn), and each finished branch's turns not sent yet with its
        score, or its failure. A refused request (409, 400) is sorted out branch
        by branch, so one lost lease does not cost the others their work."""
        w = self.w
        subs: List[Submission] = []
        ended: List[Branch] = []
        for b, turn, state in reports:
            l = b.lease
            s = Submission(l.id, l.node, l.from_ + b.sent, worker=w.name)
            if turn is not None:
                if b.cancelled:
                    continue
                s.turns, s.env_state = [turn], state
                # Every submit with turns carries it: the server defers the
                # reward of the one that ends the branch (done, or cut at
                # max_turns), and ignores it on the others.
                s.reward_pending = w.defer_rewards
                b.sent += 1
            elif b.cancelled:
                # Stopped: the lease was lost (or the worker is ending).
                ended.append(b)
                self.lose(b)
                continue
            elif b.error:
                s.error = b.error
                ended.append(b)
            else:
                s.turns, s.score = b.turns[b.sent:], b.score
                if s.turns:
                    s.env_state = b.episode.state() if b.episode is not None else None
                    s.reward_pending = w.defer_rewards
                b.sent = len(b.turns)
                ended.append(b)
                if not b.ended:  # it may come back: survive, or fork children
                    self.hold_path(l.node, b.history)
                if not s.turns and s.score is None:
                    continue
            subs.append(s)
        try:
            self.submit_sorted(subs)
        finally:
            with self.lock:
                for b in ended:
                    b.cancel()
                    self.held.pop(b.lease.id, None)

    def hold_path(self, node: int, path: List[Turn]) -> None:
        """Keeps a branch's path, so its next lease (or its children's) need not
        carry it again; the oldest of 4 × max_branches paths goes first."""
        self.paths[node] = path
        self.paths.move_to_end(node)
        while len(self.paths) > self.path_limit:
            self.paths.popitem(last=False)

    def submit_sorted(self, subs: List[Submission]) -> None:
        if not subs:
            return
        try:
            self.send(subs)
            return
        except Conflict:
            if len(subs) == 1:
                self.lose_lease(subs[0].lease)
                return
        except BadRequest:
            if len(subs) == 1 and not subs[0].turns:
                raise
        for s in subs:
            try:
                self.send([s])
            except BadRequest as e:
                if not s.turns:
                    raise
                # The store refused what the policy or env produced: the
                # branch failed like on any other policy or env error.
                try:
                    self.send([Submission(s.lease, s.node, s.from_, error=f"turn: {e.message}", worker=self.w.name)])
                except Conflict:
                    pass
                self.lose_lease(s.lease, count=False)
            except Conflict:
                self.lose_lease(s.lease)

    def lose(self, b: Branch, count: bool = True) -> None:
        """Stops b and counts it lost once (not when the worker is ending)."""
        b.cancel()
        if count and not b.lost and not self.quit.is_set():
            b.lost = True
            self.stats.lost += 1

    def lose_lease(self, lease: str, count: bool = True) -> None:
        with self.lock:
            b = self.held.get(lease)
        if b is not None:
            self.lose(b, count)

    def send(self, subs: List[Submission]) -> Submitted:
        """Submits under one client key, retrying transport failures and 5xx with
        that key until the server answers (or the deadline): the retry of a
        submit that did commit gets the first answer back instead of writing
        again."""
        w = self.w
        key = new_client_key()
        wait = w.poll
        while True:
            try:
                out = w.client.submit(w.run_id, subs, client_key=key)
            except Exception as e:  # noqa: BLE001
                if not _transient(e):
                    raise
                self.sleep(wait)
                wait = min(2 * wait, 2.0)
                continue
            self.stats.submits += 1
            self.stats.turns += sum(len(s.turns) for s in subs)
            if w.on_submit:
                w.on_submit(subs, out)
            return out

    # ---- leases ----

    def ttl(self) -> float:
        """The TTL, in ms, of the leases held (the server's answer; the
        worker's ttl_ms or the default before any)."""
        with self.lock:
            ttls = [b.lease.ttl_ms for b in self.held.values() if b.lease.ttl_ms > 0]
        return min(ttls) if ttls else (self.w.ttl_ms or DEFAULT_LEASE_TTL_MS)

    def _heartbeat(self) -> None:
        """Renews the leases held every 0.4 of their TTL, and stops the sampling
        of any the server says are gone (their submits would be refused)."""
        w = self.w
        last = time.monotonic()
        while True:
            # Waits at most a second at a time, so leases granted meanwhile
            # with a shorter TTL than assumed are renewed in time.
            left = last + heartbeat_every(int(self.ttl())) - time.monotonic()
            if left > 0:
                if self.quit.wait(min(left, 1.0)):
                    return
                continue
            last = time.monotonic()
            with self.lock:
                ids = list(self.held)
            if not ids:
                continue
            try:
                states = w.client.renew_leases(w.run_id, w.name, ids)
            except Exception:  # noqa: BLE001 - the next heartbeat tries again; a lease outlives one miss
                continue
            self.stats.renewals += 1
            with self.lock:
                lost = [self.held[s.id] for s in states if not s.held and s.id in self.held]
            for b in lost:
                b.cancel()

    def stop(self) -> None:
        """Ends the heartbeat and every branch still sampling, and releases the
        leases still held."""
        self.quit.set()
        self.sampler.close()
        with self.lock:
            bs = list(self.held.values())
            self.held.clear()
        for b in bs:
            b.cancel()
        self.heart.join(timeout=5)
        if bs:
            try:
                self.w.client.release_leases(self.w.run_id, self.w.name, [b.lease.id for b in bs])
            except Exception:  # noqa: BLE001 - unreleased leases expire after their TTL
                pass
