"""HTTP client of ``patrdb serve`` (the /api/v1/ JSON API), standard library only."""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import math
import secrets
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .batch import Batch
from .frame import FRAME_TYPE, read_lease_frame, submit_frame
from .types import (ActiveRubrics, ConsolidateNeed, InduceNeed, JudgeNeed, ShapeResult, Advantage, Checkpoint,
                    CheckpointResult, CloseGroupResult, Event, EventPage, Group, GroupTree, Health, Lease, LeaseState,
                    Node, NodeInfo, OpenStepResult, PendingResult, RewardSubmission, Rubric, Run, RunSummary, Scalars,
                    ScalarsPage, ScalarsResult, ScoreSubmission, Stats, StepMetrics, StepStatus, Submission, Submitted,
                    Task, Trajectory, Turn, from_json)

__all__ = ["Client", "PatrdbError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
           "ServerError", "BadResponse", "IncompatibleServer", "new_client_key", "MIN_API_VERSION"]

__version__ = "0.2.0"

# The oldest server API this client can use, (major, minor): the major is
# the /api/v<major> prefix; a minor adds endpoints (1.1: the /api/v1/ index).
MIN_API_VERSION = (1, 1)
PACKED_SINCE = (1, 5)  # the API version that reads and writes packed token arrays
FILTER_SINCE = (1, 6)  # the API version that records filtered groups on close
FRAME_SINCE = (1, 7)  # the API version that reads submits and writes leases as frames (frame.py)


class PatrdbError(Exception):
    """A non-2xx answer: ``status`` (HTTP), ``code`` (machine word) and the server's one-line message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"HTTP {status} {code}: {message}" if code else f"HTTP {status}: {message}")
        self.status, self.code, self.message = status, code, message


class BadRequest(PatrdbError):
    """400/413/415: malformed or invalid input. Nothing was written."""


class Unauthorized(PatrdbError):
    """401: missing or wrong bearer token."""


class Forbidden(PatrdbError):
    """403: a read-only server, or a Host the server does not answer."""


class NotFound(PatrdbError):
    """404: the run, group, node, rubric or checkpoint does not exist."""


class Conflict(PatrdbError):
    """409: the state forbids the request. Nothing was written. ``code`` says which
    rule: "lease_lost" (the lease expired and was handed on, the interval is over,
    a published policy version voided it, or the server restarted: drop the work
    and lease again), "not_holder" (the lease was granted to another worker),
    "stale" (the worker's policy version, or a turn's, is further behind the
    run's than its max_staleness: load newer weights), "not_pending" (a deferred
    reward or remote score for a branch that awaits none), "branch_ended",
    "too_early" (a score before the interval's K turns), "step_exists",
    "config_mismatch", "needs_migration" (a write to a file of an older
    format: run ``patrdb migrate``), or "conflict" (a closed group, a client
    key reused for a different request, ...)."""


class ServerError(PatrdbError):
    """5xx: the server failed; a write may be retried with the same client key."""


class BadResponse(PatrdbError):
    """An answer that is not the API's JSON (another service on the port, a proxy's error page):
    ``message`` quotes the start of the body."""


class IncompatibleServer(Exception):
    """The server speaks an API version this client cannot use (see ``MIN_API_VERSION``)."""


_BY_STATUS = {400: BadRequest, 413: BadRequest, 415: BadRequest, 401: Unauthorized, 403: Forbidden,
              404: NotFound, 405: BadRequest, 409: Conflict}


def _body_excerpt(raw: bytes, limit: int = 200) -> str:
    text = raw.decode(errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + f"... ({len(raw)} bytes)"


def _json_answer(status: int, raw: bytes) -> Any:
    """The decoded body of a 2xx answer; BadResponse, naming status and body, when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        raise BadResponse(status, "not_json", "the answer is not JSON: " + (_body_excerpt(raw) or "(empty)")) from None


def _retry_after(value: Optional[str]) -> float:
    """Seconds a Retry-After header asks for (1 to 30; 2 when absent or a date)."""
    try:
        return min(max(float(value or ""), 1.0), 30.0)
    except ValueError:
        return 2.0


def new_client_key() -> str:
    """A random client key (128 bits, hex)."""
    return secrets.token_hex(16)


TurnLike = Union[Turn, Mapping[str, Any]]


def _turn_json(t: TurnLike) -> Dict[str, Any]:
    return t.to_json() if isinstance(t, Turn) else dict(t)


def _check_finite(x: float, what: str) -> float:
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"{what} is {x}: JSON has no NaN or infinity")
    return x


class _Held:
    """A thread's connection, closed when the thread or the client lets it go
    (a thread's locals are dropped when it ends)."""

    __slots__ = ("conn",)

    def __init__(self, conn: http.client.HTTPConnection):
        self.conn = conn

    def __del__(self) -> None:
        self.conn.close()


class Client:
    """Talks to one patrdb server.

    Every write carries a client key. Pass your own (deterministic keys make a
    restarted trainer's repeated requests safe) or let the client draw one; a
    write that fails on the network or with a 5xx is retried ``retries`` times
    with the same key, so the server applies it at most once.

    A server that has just started checks each run once before its first use
    (on a big file not in the page cache that can take minutes); meanwhile it
    answers 503 "checking" with Retry-After. Those answers are waited out,
    without counting as retries, for up to ``check_wait`` seconds in all.
    """

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 60.0,
                 retries: int = 3, backoff: float = 0.2, check_version: bool = True,
                 check_wait: float = 1800.0):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.check_wait = check_wait
        u = urllib.parse.urlsplit(self.base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base_url!r}: want http://host:port or https://host:port")
        self._https = u.scheme == "https"
        self._host, self._port, self._prefix = u.hostname, u.port, u.path
        # One keep-alive connection per thread: http.client connections are
        # not thread-safe, and a trainer's worker threads share one Client.
        self._local = threading.local()
        self._version_lock = threading.Lock()
        self._api_version: Optional[str] = None if check_version else ""

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the calling thread's connection; another thread's closes when
        that thread ends or the client is dropped."""
        self._local.conn = None

    def _connection(self) -> http.client.HTTPConnection:
        held = getattr(self._local, "conn", None)
        if held is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            held = self._local.conn = _Held(cls(self._host, self._port, timeout=self.timeout))
        return held.conn

    def check_version(self) -> str:
        """Reads the server's API version from its index (``GET /api/v1/``) and
        returns it; raises IncompatibleServer when this client cannot use it.
        The first request of a client calls it once (``check_version=False``
        turns that off)."""
        try:
            _, raw = self.fetch("GET", "/api/v1/", _checked=True)
        except NotFound:
            raise IncompatibleServer("the server has no /api/v1/ index, so it predates API versions: "
                                     f"this client needs API {MIN_API_VERSION[0]}.{MIN_API_VERSION[1]} or newer; "
                                     "upgrade patrdb") from None
        index = _json_answer(200, raw)
        version = str(index.get("api_version", "") if isinstance(index, dict) else "")
        try:
            major, minor = (int(x) for x in version.split(".")[:2])
        except ValueError:
            raise IncompatibleServer(f"the server reports API version {version!r}, not <major>.<minor>") from None
        if major != MIN_API_VERSION[0] or minor < MIN_API_VERSION[1]:
            raise IncompatibleServer(f"the server speaks API {version}; this client (patrdb-client {__version__}) "
                                     f"needs {MIN_API_VERSION[0]}.x from {MIN_API_VERSION[0]}.{MIN_API_VERSION[1]} on")
        self._api_version = version
        return version

    @property
    def api_version(self) -> Optional[str]:
        """The server's API version once checked ("" when checking is off)."""
        return self._api_version

    def packed(self) -> bool:
        """Whether the server reads and writes packed token arrays (API 1.5 on):
        then turns travel as base64 of their little-endian words, not as arrays
        of numbers, both ways."""
        return self._speaks(PACKED_SINCE)

    def _speaks(self, since: Tuple[int, int]) -> bool:
        """Whether the server's API version is ``since`` or later."""
        version = self._api_version
        if version is None:
            version = self.check_version()
        try:
            major, minor = (int(x) for x in (version or "").split(".")[:2])
        except ValueError:
            return False
        return (major, minor) >= since

    def _tokens(self) -> Dict[str, Any]:
        return {"tokens": "packed"} if self.packed() else {}

    # ---- transport ----

    def request(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                query: Optional[Dict[str, Any]] = None) -> Tuple[int, Dict[str, Any]]:
        """Sends one request (retrying per the class rules) and returns (status, decoded body)."""
        data = None
        if body is not None:
            # allow_nan=False: NaN and infinity are not JSON; refuse them here.
            data = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
        return self.raw(method, path, data, query=query)

    def raw(self, method: str, path: str, data: Optional[bytes] = None, query: Optional[Dict[str, Any]] = None,
            content_type: str = "application/json") -> Tuple[int, Dict[str, Any]]:
        """Sends bytes as they are (tests use it to send what ``request`` refuses)."""
        status, raw = self.fetch(method, path, data, query, content_type)
        return status, _json_answer(status, raw) if raw else {}

    def fetch(self, method: str, path: str, data: Optional[bytes] = None, query: Optional[Dict[str, Any]] = None,
              content_type: str = "application/json", _checked: bool = False) -> Tuple[int, bytes]:
        """Sends one request (retrying per the class rules) and returns (status, body bytes)."""
        status, raw, _ = self._exchange(method, path, data, query, content_type, _checked)
        return status, raw

    def _exchange(self, method: str, path: str, data: Optional[bytes] = None, query: Optional[Dict[str, Any]] = None,
                  content_type: str = "application/json", _checked: bool = False,
                  accept: str = "", into: Optional[bytearray] = None) -> Tuple[int, Any, str]:
        """``fetch``, asking for ``accept`` when given; also returns the answer's Content-Type.
        With ``into``, a successful answer's body is read into that buffer, resized to
        it, and returned in place of a new bytes object (``_read_into``)."""
        if self._api_version is None and not _checked and path != "/api/v1/health":
            with self._version_lock:
                if self._api_version is None:
                    self.check_version()
        target = self._prefix + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        headers = {"User-Agent": "patrdb-client/" + __version__, "Accept-Encoding": "identity"}
        if data is not None and content_type:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        last: Optional[Exception] = None
        attempt, stale_retried = 0, False
        checking_until: Optional[float] = None
        while attempt <= self.retries:
            if attempt:
                time.sleep(self.backoff * (2 ** (attempt - 1)))
            conn = self._connection()
            reused = conn.sock is not None
            try:
                conn.request(method, target, body=data, headers=headers)
                resp = conn.getresponse()
                status = resp.status
                raw = _read_into(resp, into) if into is not None and status < 400 else resp.read()
                if resp.will_close:
                    self.close()
            except (http.client.HTTPException, OSError) as e:
                self.close()
                # A kept-alive connection the server closed while idle fails
                # on first use: try once more at once on a new one.
                if reused and not stale_retried and isinstance(
                        e, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)):
                    stale_retried = True
                    continue
                last = e
                attempt += 1
                continue
            if status < 400:
                return status, raw, resp.getheader("Content-Type") or ""
            try:
                eb = json.loads(raw)
                if not isinstance(eb, dict):
                    raise ValueError
            except ValueError:
                eb = {"error": "(not JSON) " + (_body_excerpt(raw) or "(empty body)"), "code": ""}
            err = _BY_STATUS.get(status, ServerError if status >= 500 else PatrdbError)(
                status, eb.get("code", ""), eb.get("error", ""))
            if status < 500:
                raise err from None
            last = err
            if status == 503 and eb.get("code") == "checking":
                now = time.monotonic()
                if checking_until is None:
                    checking_until = now + self.check_wait
                if now < checking_until:
                    time.sleep(min(_retry_after(resp.getheader("Retry-After")), max(checking_until - now, 0)))
                    continue
            attempt += 1
        assert last is not None
        raise last

    def _get(self, path: str, **query: Any) -> Dict[str, Any]:
        return self.request("GET", path, query=query)[1]

    def _post(self, path: str, body: Dict[str, Any], client_key: Optional[str]) -> Dict[str, Any]:
        body = dict(body)
        body["client_key"] = client_key or new_client_key()
        return self.request("POST", path, body)[1]

    @staticmethod
    def _run(run: str, *rest: Any) -> str:
        return "/api/v1/runs/" + urllib.parse.quote(run, safe="") + "".join("/" + str(r) for r in rest)

    # ---- reads ----

    def health(self) -> Health:
        return from_json(Health, self._get("/api/v1/health"))

    def runs(self, steps: bool = False, buckets: bool = False) -> List[RunSummary]:
        """Every run's summary, from its counters; ``steps`` adds a row per
        step, ``buckets`` the bytes per bucket (a walk of every page)."""
        q = _summary_query(steps, buckets)
        return [from_json(RunSummary, r) for r in self._get("/api/v1/runs", **q)["runs"]]

    def run(self, run: str, steps: bool = False, buckets: bool = False) -> RunSummary:
        """One run's summary (see ``runs``)."""
        return from_json(RunSummary, self._get(self._run(run), **_summary_query(steps, buckets)))

    def steps(self, run: str) -> List[StepMetrics]:
        """Per-step metrics: success, mean reward, zero-variance share, rubric pool sizes."""
        return [from_json(StepMetrics, s) for s in self._get(self._run(run, "steps"))["steps"]]

    def groups(self, run: str, step: int = 0) -> List[Group]:
        """The groups of ``step`` (0: every step), in (step, id) order."""
        return [from_json(Group, g) for g in self._get(self._run(run, "groups"), step=step)["groups"]]

    def tree(self, run: str, group: int) -> GroupTree:
        return from_json(GroupTree, self._get(self._run(run, "groups", group)))

    def node(self, run: str, node: int) -> NodeInfo:
        return from_json(NodeInfo, self._get(self._run(run, "nodes", node)))

    def trajectory(self, run: str, node: int) -> Trajectory:
        return from_json(Trajectory, self._get(self._run(run, "nodes", node, "trajectory"), **self._tokens()))

    def frontier(self, run: str, step: int = 0) -> List[Node]:
        """The active nodes (of one step, or all): what a resume continues."""
        return [from_json(Node, n) for n in self._get(self._run(run, "frontier"), step=step)["nodes"]]

    def rubrics(self, run: str, pool: str = "all") -> List[Rubric]:
        return [from_json(Rubric, r) for r in self._get(self._run(run, "rubrics"), pool=pool)["rubrics"]]

    def advantages(self, run: str, step: int = 0, group: int = 0) -> List[Advantage]:
        q = {"step": step, "group": group or None}
        return [from_json(Advantage, a) for a in self._get(self._run(run, "advantages"), **q)["advantages"]]

    def events(self, run: str, from_seq: int = 1, limit: int = 1000) -> EventPage:
        return from_json(EventPage, self._get(self._run(run, "events"), **{"from": from_seq, "limit": limit}))

    def iter_events(self, run: str, from_seq: int = 1, page: int = 1000) -> Iterator[Event]:
        """Every event from ``from_seq`` on, page by page."""
        while from_seq:
            p = self.events(run, from_seq, page)
            yield from p.events
            from_seq = p.next

    def checkpoint(self, run: str, step: int = 0) -> Checkpoint:
        """The latest checkpoint at or before ``step`` (0: the latest)."""
        return from_json(Checkpoint, self._get(self._run(run, "checkpoint"), step=step)["checkpoint"])

    def stats(self, run: Optional[str] = None) -> Stats:
        """The file's size and each run's figures from its counters, or ``run``'s
        alone. A damaged run is listed with ``damaged`` (why) and zero figures,
        beside the others; asked for alone, it is a ServerError ("damaged")."""
        return from_json(Stats, self._get("/api/v1/stats", run=run))

    def batch(self, run: str, step: int, layout: str = "rows", groups: Optional[Sequence[int]] = None,
              exclude_pruned: bool = False, exclude_truncated: bool = False, include_failed: bool = False,
              min_policy_version: int = 0, max_policy_version: int = 0, credit: str = "repeat",
              norm: str = "token-mean", into: Optional[bytearray] = None) -> Batch:
        """The training batch of ``step`` (its closed groups' leaves), ``layout`` "rows"
        (one row per leaf, whole sequence) or "tree" (every token once), ``credit`` on
        shared tokens "repeat", "mean" or "owner", loss coefficients normalised
        ``norm`` "token-mean" or "seq-mean-token-mean", parsed from the safetensors
        file the server streams; see ``patrdb_client.batch``.

        ``into``, a bytearray kept from step to step, receives the file instead of
        fresh memory: most of a large batch's time here is the kernel mapping new
        pages (a 225 MB rows batch: 0.10 s into a reused buffer, 0.20 s without,
        in bench/RESULTS.md's batchbench section). The batch's arrays are views
        of the buffer, so the call refuses (BufferError, before any request, the
        buffer as it was) while anything made from the last batch read into it
        still holds it: an array, a row's view, or a tensor built from one. On
        any other error the buffer's contents are undefined."""
        if into is not None:
            _check_reusable(into)
        q: Dict[str, Any] = {"layout": layout, "credit": credit, "norm": norm}
        if groups is not None:
            q["groups"] = ",".join(str(int(g)) for g in groups)
        for name, on in (("exclude_pruned", exclude_pruned), ("exclude_truncated", exclude_truncated),
                         ("include_failed", include_failed)):
            if on:
                q[name] = "true"
        if min_policy_version:
            q["min_policy_version"] = int(min_policy_version)
        if max_policy_version:
            q["max_policy_version"] = int(max_policy_version)
        if into is not None:
            return Batch(self._exchange("GET", self._run(run, "steps", step, "batch"), query=q, into=into)[1])
        return Batch(self.fetch("GET", self._run(run, "steps", step, "batch"), query=q)[1])

    # ---- writes ----

    def create_run(self, run: str, tree: Optional[Mapping[str, Any]] = None, rubric: Optional[Mapping[str, Any]] = None,
                   meta: Optional[Mapping[str, str]] = None, client_key: Optional[str] = None) -> Run:
        """Creates a run. ``tree`` and ``rubric`` override the defaults field by field
        (tree: b0, k, m, top_expand, delta, prune_rule, repeat_prune, max_turns, max_active, seed, no_scoring,
        and for asynchronous rollouts max_staleness, on_publish ("continue" or "abort"), remote_scores,
        pending_ttl_ms)."""
        body: Dict[str, Any] = {"id": run}
        if tree is not None:
            body["tree"] = dict(tree)
        if rubric is not None:
            body["rubric"] = dict(rubric)
        if meta:
            body["meta"] = dict(meta)
        return from_json(Run, self._post("/api/v1/runs", body, client_key)["run"])

    def set_run_status(self, run: str, status: str, client_key: Optional[str] = None) -> Run:
        return from_json(Run, self._post(self._run(run, "status"), {"status": status}, client_key)["run"])

    def put_checkpoint(self, run: str, step: int, inline: Optional[bytes] = None, uri: str = "", hash: str = "",
                       meta: Optional[Mapping[str, str]] = None, client_key: Optional[str] = None) -> CheckpointResult:
        """Records the trainer's state after ``step`` and marks the step complete."""
        body: Dict[str, Any] = {"step": step}
        if inline is not None:
            body["inline"] = base64.b64encode(inline).decode()
        if uri:
            body["uri"] = uri
        if hash:
            body["hash"] = hash
        if meta:
            body["meta"] = dict(meta)
        return from_json(CheckpointResult, self._post(self._run(run, "checkpoints"), body, client_key))

    def log(self, run: str, step: int, values: Mapping[str, Any], client_key: Optional[str] = None) -> Scalars:
        """Records the trainer's own figures of ``step`` — ``log("exp-1", 3, {"loss": 0.42, "kl": 0.01})`` —
        beside its rollouts, merged into what the step holds (a name logged again replaces its value).
        Values are finite numbers (a numpy scalar or a 0-d tensor's ``.item()`` too). Returns the step's
        record after the write."""
        body = {"step": step, "values": {str(k): _check_finite(float(v), f"scalar {k!r}") for k, v in values.items()}}
        return from_json(ScalarsResult, self._post(self._run(run, "scalars"), body, client_key)).scalars

    def scalars(self, run: str, from_step: int = 0) -> ScalarsPage:
        """The trainer's figures of every step from ``from_step`` on, in step order."""
        return from_json(ScalarsPage, self._get(self._run(run, "scalars"), **({"from": from_step} if from_step else {})))

    # ---- the rollout protocol ----

    def open_step(self, run: str, step: int, tasks: Sequence[Union[Task, Mapping[str, Any]]],
                  tree: Optional[Mapping[str, Any]] = None, client_key: Optional[str] = None) -> OpenStepResult:
        """Opens one group per task at ``step``, each with the run's B0 root branches.
        Asking again with the same tasks returns the same groups (a restarted driver);
        the step's tasks followed by more open groups for the new ones (a step
        extended for more informative groups); other tasks, or fewer, are a Conflict
        ("step_exists"). ``tree`` names the tree config
        fields you rely on (e.g. ``{"k": 5}``): a run that recorded other values
        refuses with Conflict ("config_mismatch")."""
        body: Dict[str, Any] = {"step": step, "tasks": [t.to_json() if isinstance(t, Task) else dict(t) for t in tasks]}
        if tree is not None:
            body["tree"] = dict(tree)
        return from_json(OpenStepResult, self._post(self._run(run, "steps"), body, client_key))

    def lease(self, run: str, worker: str = "", max: int = 0, step: int = 0, ttl_ms: int = 0,
              history: bool = True, policy_version: int = 0,
              have: Optional[Sequence[Tuple[int, int]]] = None) -> List[Lease]:
        """Leases up to ``max`` branches (0: every free one) of ``step`` (0: any open
        step) that need work, for ``ttl_ms`` milliseconds without a sign of life (0:
        the server's default, 30 s; renew every 0.4 TTL while a tool runs). The
        leases are ``worker``'s alone: every submit, renewal and release names it.
        ``policy_version`` is the version of the weights the worker samples with: a
        worker further behind the run's version than its max_staleness is refused
        (Conflict "stale"). With ``history`` each lease carries its branch's path so
        far; ``have`` lists (node, path length) of the paths the worker still holds,
        and a lease of such a branch, or of a child forked from it, then carries
        only the turns past them (``history_of`` names the node whose held path
        supplies the first ``history_from`` turns). Writes nothing."""
        body: Dict[str, Any] = {"worker": worker, "max": max, "step": step, "ttl_ms": ttl_ms, "history": history}
        if policy_version:
            body["policy_version"] = int(policy_version)
        if have:
            body["have"] = [{"node": int(n), "path_len": int(k)} for n, k in have]
        # A server of API 1.7 on answers a frame (no base64, no escaped text);
        # an older one JSON, packed from 1.5 on.
        accept = FRAME_TYPE + ", application/json;q=0.9" if self._speaks(FRAME_SINCE) else ""
        status, raw, ctype = self._exchange("POST", self._run(run, "leases"), json.dumps(body).encode(),
                                            self._tokens(), accept=accept)
        if ctype.split(";")[0].strip() == FRAME_TYPE:
            try:
                out = read_lease_frame(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise BadResponse(status, "bad_frame", f"the lease frame does not parse: {e}") from None
        else:
            out = _json_answer(status, raw)
        return [from_json(Lease, x) for x in out["leases"]]

    def renew_leases(self, run: str, worker: str, leases: Sequence[str]) -> List[LeaseState]:
        """A heartbeat: each lease ``worker`` still holds lasts its TTL from now
        again. The answer says lease by lease whether it is held, or why it is
        gone (drop that branch's work). Writes nothing."""
        return self._leases(run, "renew", worker, leases)

    def release_leases(self, run: str, worker: str, leases: Sequence[str]) -> List[LeaseState]:
        """Gives leases back: their branches may be leased again at once. What was
        submitted under them stays. Writes nothing."""
        return self._leases(run, "release", worker, leases)

    def _leases(self, run: str, what: str, worker: str, leases: Sequence[str]) -> List[LeaseState]:
        body = {"worker": worker, "leases": [str(x) for x in leases]}
        out = self.request("POST", self._run(run, "leases", what), body)[1]
        return [from_json(LeaseState, x) for x in out["leases"]]

    def publish(self, run: str, version: int, client_key: Optional[str] = None) -> Run:
        """Records ``version`` as the run's current policy version (new weights are
        live). Versions only go forward; publishing the current one again
        writes nothing and returns the run (a resumed trainer may). From then on leases and turns are judged
        against it (the run's max_staleness), and under on_publish "abort" every
        lease granted before it is void."""
        return from_json(Run, self._post(self._run(run, "version"), {"version": int(version)}, client_key)["run"])

    def pending(self, run: str, step: int, history: bool = True) -> PendingResult:
        """The branches of ``step`` that wait for a remote process score
        (``scores``) or a deferred outcome reward (``rewards``), each with its
        path when ``history``. Listing them starts their pending timeout."""
        q = {"history": "1" if history else "0", **self._tokens()}
        return from_json(PendingResult, self._get(self._run(run, "steps", step, "pending"), **q))

    def submit_rewards(self, run: str, rewards: Sequence[Union[RewardSubmission, Mapping[str, Any]]],
                       client_key: Optional[str] = None) -> Submitted:
        """Delivers deferred outcome rewards (or the verifier's errors) in one
        transaction, from any process. One that names a branch awaiting no
        reward refuses the request (Conflict "not_pending") and nothing is
        written. ``done`` lists the groups left with nothing to wait for."""
        return self._deliver(run, "rewards", "reward", rewards, client_key)

    def submit_scores(self, run: str, scores: Sequence[Union[ScoreSubmission, Mapping[str, Any]]],
                      client_key: Optional[str] = None) -> Submitted:
        """Delivers process scores (or the scorer's errors) apart from the turns
        they score, in one transaction, from any process (a remote process reward
        model; the run has remote_scores). A group routes when its interval's last
        score arrives, exactly as if its workers had scored."""
        return self._deliver(run, "scores", "score", scores, client_key)

    def _deliver(self, run: str, what: str, value: str,
                 items: Sequence[Union[RewardSubmission, ScoreSubmission, Mapping[str, Any]]],
                 client_key: Optional[str]) -> Submitted:
        body = [x.to_json() if isinstance(x, (RewardSubmission, ScoreSubmission)) else dict(x) for x in items]
        for x in body:
            if x.get(value) is not None:
                _check_finite(x[value], f"node {x.get('node')} {value}")
        return from_json(Submitted, self._post(self._run(run, what), {what: body}, client_key))

    def submit(self, run: str, submissions: Sequence[Union[Submission, Mapping[str, Any]]],
               client_key: Optional[str] = None) -> Submitted:
        """Submits leased work in one transaction: turns, scores, outcome rewards,
        failures. One refused submission refuses all (nothing is written); the
        server routes every group whose interval the submit completed. To a
        server of API 1.7 on it goes as a frame, its turns' text and tokens
        as raw bytes; to an older one as JSON, its token arrays packed from
        1.5 on."""
        framed = self._speaks(FRAME_SINCE)
        packed = self.packed()
        subs = []
        for s in submissions:
            if not isinstance(s, Submission):
                subs.append(dict(s))
            elif framed and s.turns:  # the turns stay records: the frame reads their members
                subs.append({**dataclasses.replace(s, turns=[]).to_json(), "turns": s.turns})
            else:
                subs.append(s.to_json(packed))
        for s in subs:
            for i, t in enumerate(s.get("turns", ())):
                reward = t.get("reward", 0.0) if isinstance(t, Mapping) else t.reward
                _check_finite(reward, f"node {s.get('node')} turn {i} reward")
            for k in ("score", "reward"):
                if s.get(k) is not None:
                    _check_finite(s[k], f"node {s.get('node')} {k}")
        if not framed:
            return from_json(Submitted, self._post(self._run(run, "submit"), {"submissions": subs}, client_key))
        body = {"client_key": client_key or new_client_key(), "submissions": subs}
        return from_json(Submitted, self.raw("POST", self._run(run, "submit"), submit_frame(body), content_type=FRAME_TYPE)[1])

    def abandon_step(self, run: str, step: int, reason: str, client_key: Optional[str] = None) -> OpenStepResult:
        """Gives up the step's open groups, on record (active branches fail with the
        reason, groups close without advantages), so a checkpoint can complete it."""
        return from_json(OpenStepResult, self._post(self._run(run, "steps", step, "abandon"), {"reason": reason}, client_key))

    def step_status(self, run: str, step: int) -> StepStatus:
        """Open, done-but-not-closed and closed groups, active and leased branches,
        branches awaiting a remote score or a deferred reward, the run's policy version."""
        return from_json(StepStatus, self._get(self._run(run, "steps", step, "status")))

    def close_group(self, run: str, group: int, rubric_scores: Optional[Mapping[int, float]] = None,
                    lambda_: Optional[float] = None, rubrics: Optional[Sequence[int]] = None,
                    pool: Optional[Mapping[str, Any]] = None, client_key: Optional[str] = None,
                    filter: bool = False) -> CloseGroupResult:
        """Closes the group and returns its GRPO advantages, shaped by the centred
        ``rubric_scores`` (one per leaf, in [-1, 1]) when given, or by the run's
        rubric buffer with the answers ``shape_answers`` gathered (``pool``).
        ``filter`` (dynamic sampling) records a group that closes with zero
        outcome variance as filtered: a ``group.filter`` event beside its close
        (API 1.6 on; an older server closes the group without the record)."""
        body: Dict[str, Any] = {}
        if filter and self._speaks(FILTER_SINCE):
            body["filter"] = True
        if pool is not None:
            body["pool"] = dict(pool)
        if rubric_scores is not None:
            body["rubric_scores"] = [{"leaf": int(k), "score": _check_finite(v, f"rubric score of leaf {k}")}
                                     for k, v in rubric_scores.items()]
        if lambda_ is not None:
            body["lambda"] = lambda_
        if rubrics:
            body["rubrics"] = [int(r) for r in rubrics]
        return from_json(CloseGroupResult, self._post(self._run(run, "groups", group, "close"), body, client_key))

    # ---- the rubric buffer (ARBOR) ----

    def activate(self, run: str, step: int, client_key: Optional[str] = None) -> ActiveRubrics:
        """Begins ``step`` of the rubric buffer: activates its public rubrics (idempotent)."""
        return from_json(ActiveRubrics, self._post(self._run(run, "rubrics", "activate"), {"step": step}, client_key))

    def active_rubrics(self, run: str, step: int) -> ActiveRubrics:
        return from_json(ActiveRubrics, self._get(self._run(run, "rubrics", "active"), step=step))

    def shape(self, run: str, group: int, answers: Optional[Mapping[str, Any]] = None) -> ShapeResult:
        """Runs the pool over the group's leaves with ``answers`` (writes nothing) and
        returns what it still needs, or, when complete, the shaping it would apply."""
        return from_json(ShapeResult, self.request("POST", self._run(run, "groups", group, "shape"), dict(answers or {}))[1])

    def shape_answers(self, run: str, group: int,
                      judge: Callable[[JudgeNeed], str],
                      induce: Optional[Callable[[InduceNeed], List[Dict[str, str]]]] = None,
                      consolidate: Optional[Callable[[ConsolidateNeed], List[Dict[str, Any]]]] = None,
                      outcomes: Optional[Mapping[int, float]] = None, max_rounds: int = 6) -> Dict[str, Any]:
        """Plays the pool's questions to your LLM callbacks until shaping is complete and
        returns the answers to pass as ``close_group(..., pool=answers)``.

        ``judge(need)`` answers "a", "b" or "tie" for the pair as shown; ``induce(need)``
        returns drafts ``[{"text": ...}]``; ``consolidate(need)`` returns
        ``[{"text": ..., "absorbs": [draft ids]}]``."""
        answers: Dict[str, Any] = {"judgements": []}
        if outcomes:
            answers["outcomes"] = [{"leaf": int(k), "outcome": float(v)} for k, v in outcomes.items()]
        for _ in range(max_rounds):
            res = self.shape(run, group, answers)
            if res.complete:
                return answers
            for n in res.needs.judge:
                j = {"a": n.a, "b": n.b, "result": judge(n)}
                if n.rubric:
                    j["rubric"] = n.rubric
                else:
                    j["draft"] = n.draft
                answers["judgements"].append(j)
            if res.needs.induce is not None:
                if induce is None:
                    raise ValueError("the pool asks for drafts: give an induce callback")
                answers["drafts"] = list(induce(res.needs.induce))
            if res.needs.consolidate is not None:
                if consolidate is None:
                    raise ValueError("the pool asks for a consolidation: give a consolidate callback")
                answers["consolidation"] = list(consolidate(res.needs.consolidate))
        raise RuntimeError(f"shaping of group {group} did not complete in {max_rounds} rounds")


def _summary_query(steps: bool, buckets: bool) -> Dict[str, Any]:
    return {"steps": "true" if steps else None, "buckets": "true" if buckets else None}


def _check_reusable(buf: Any) -> None:
    """Refuses a buffer that cannot take a batch: not a bytearray, or one that
    something made from its last batch still views. Growing it by a byte is
    refused exactly then (a bytearray with exported views cannot be resized)."""
    if not isinstance(buf, bytearray):
        raise TypeError(f"into must be a bytearray, not {type(buf).__name__}")
    try:
        buf.append(0)
    except BufferError:
        raise BufferError("into still holds the last batch read into it (an array, view or tensor of it is "
                          "alive): drop those first, or pass another bytearray") from None
    del buf[-1]


def _read_into(resp: http.client.HTTPResponse, buf: bytearray) -> bytearray:
    """Reads resp's body into buf, resized to the body: straight from the socket,
    with no bytes object in between, when the server gave its length."""
    n = resp.length
    if n is None:  # no Content-Length: the body as it comes, then copied
        body = resp.read()
        buf[:] = body
        return buf
    if len(buf) < n:
        buf.extend(bytes(n - len(buf)))
    else:
        del buf[n:]
    view = memoryview(buf)
    try:
        got = 0
        while got < n:
            k = resp.readinto(view[got:])
            if not k:
                raise http.client.IncompleteRead(b"", n - got)
            got += k
    finally:
        view.release()
    return buf
