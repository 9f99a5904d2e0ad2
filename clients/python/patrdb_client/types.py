"""Typed records of the patrdb HTTP API.

Field names are the API's (the store records' snake_case JSON names). Every
record is a dataclass built with ``from_json``, which ignores members it does
not know, so a newer server does not break an older client.
"""

from __future__ import annotations

import array
import base64
import dataclasses
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

__all__ = [
    "from_json", "Health", "Run", "BucketSize", "RunSummary", "StepMetrics", "Group", "Score",
    "Decision", "Node", "NodeInfo", "GroupTree", "Turn", "PathTurn", "Segment", "Trajectory",
    "Advantage", "RubricOrigin", "RubricUsage", "Rubric", "Checkpoint", "Event", "EventPage",
    "RunStats", "Stats", "Task", "TurnKey", "Lease", "LeaseState", "Submission", "SubmitResult", "RoutedDecision",
    "Routing", "Submitted", "OpenStepResult", "StepStatus", "RewardSubmission", "ScoreSubmission", "PendingWork",
    "PendingResult", "CloseGroupResult", "CheckpointResult", "ActiveRubrics",
    "Scalars", "ScalarsResult", "ScalarsPage",
    "JudgeNeed", "InduceNeed",
    "ConsolidateNeed", "ShapeNeeds", "LeafScore", "ShapeResult",
]


def unpack_words(text: str, kind: str) -> List[Any]:
    """A packed token array (base64 of little-endian 4-byte words): ids
    (kind "I") or logprobs ("f"), as a list."""
    a = array.array(kind)
    a.frombytes(base64.b64decode(text))
    if sys.byteorder != "little":
        a.byteswap()
    return a.tolist()


def pack_words(values: Sequence[Any], kind: str) -> str:
    """Values as a packed token array: base64 of their little-endian 4-byte
    words (kind "I" for ids, "f" for logprobs)."""
    a = array.array(kind, values)
    if sys.byteorder != "little":
        a.byteswap()
    return base64.b64encode(a.tobytes()).decode("ascii")


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union:  # Optional[X]
        inner = [a for a in args if a is not type(None)]
        return _convert(inner[0], value) if inner else value
    if origin in (list, List):
        if args and args[0] in (int, float) and isinstance(value, str):  # packed tokens or logprobs
            return unpack_words(value, "I" if args[0] is int else "f")
        if args and args[0] in (int, str, bool):
            return list(value)
        return [_convert(args[0], v) for v in value] if args else list(value)
    if origin in (dict, Dict):
        return {k: _convert(args[1], v) for k, v in value.items()} if args else dict(value)
    if tp is bytes:
        return base64.b64decode(value) if isinstance(value, str) else bytes(value)
    if dataclasses.is_dataclass(tp):
        return from_json(tp, value)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


_HINTS: Dict[type, Dict[str, Any]] = {}


def from_json(cls: type, data: Dict[str, Any]):
    """Builds dataclass ``cls`` from a decoded JSON object, recursively."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    kwargs = {}
    for f in dataclasses.fields(cls):
        name = f.metadata.get("json", f.name)
        if name in data:
            kwargs[f.name] = _convert(hints[f.name], data[name])
    return cls(**kwargs)


@dataclass
class Health:
    status: str = ""
    api: str = ""
    file: str = ""  # identifies the file served, without saying where it lives
    path: str = ""
    read_only: bool = False


@dataclass
class Run:
    id: str = ""
    config: Any = None  # the run's config as a JSON value: {"tree": {...}, "rubric": {...}}
    status: str = ""
    last_step: int = 0
    created_at: int = 0
    updated_at: int = 0
    meta: Dict[str, str] = field(default_factory=dict)
    policy_version: int = 0  # the newest weights the trainer published
    dropped_step: int = 0  # steps up to it were dropped from the file (retention; a lake holds them)
    dropped_seq: int = 0  # and events up to it that only they needed


@dataclass
class BucketSize:
    name: str = ""
    keys: int = 0
    bytes: int = 0
    used: int = 0


@dataclass
class StepSummary:
    step: int = 0
    groups: int = 0
    open_groups: int = 0
    nodes: int = 0
    turns: int = 0  # turns the step's groups sampled, each stored once
    leaves: int = 0
    rewarded: int = 0
    mean_reward: Optional[float] = None  # over the rewarded leaves; None when none
    zero_variance_groups: int = 0


@dataclass
class RunSummary:
    """A run's record and its figures, read from the run's counters.
    ``steps`` (``steps=True``) and ``bytes``/``buckets`` (``buckets=True``,
    a walk of every page of the run) only when asked for."""
    run: Run = field(default_factory=Run)
    status: str = ""
    last_step: int = 0
    dropped_step: int = 0  # steps up to it were dropped from the file; their figures stay
    groups: int = 0
    open_groups: int = 0
    open_step: int = 0
    nodes: int = 0
    by_status: Dict[str, int] = field(default_factory=dict)
    leaves: int = 0
    frontier: int = 0
    turns: int = 0
    turns_materialised: int = 0
    prefix_sharing: float = 0.0
    rewarded: int = 0
    mean_reward: Optional[float] = None
    zero_variance_groups: int = 0
    events: int = 0
    steps: List[StepSummary] = field(default_factory=list)
    walked: bool = False  # the run has no counters: the figures were counted by reading every node
    bytes: int = 0
    buckets: List[BucketSize] = field(default_factory=list)
    damaged: str = ""  # in the run list only: why the run cannot be read


@dataclass
class StepMetrics:
    step: int = 0
    groups: int = 0
    closed_groups: int = 0
    leaves: int = 0
    success: float = 0.0
    mean_reward: float = 0.0
    zero_variance_groups: int = 0
    zero_variance_share: float = 0.0
    unlocked_groups: int = 0
    pools: Dict[str, int] = field(default_factory=dict)
    # Policy versions behind the run's: the step's turns when written
    # (sampled), its leaves' whole paths when their group closed (consumed,
    # the wait counted); 0 for a run that never published a version.
    sampled_staleness_mean: float = 0.0
    sampled_staleness_max: int = 0
    consumed_staleness_mean: float = 0.0
    consumed_staleness_max: int = 0


@dataclass
class Group:
    id: int = 0
    step: int = 0
    task: str = ""
    prompt: str = ""
    gold: str = ""
    roots: List[int] = field(default_factory=list)
    status: str = ""
    interval: int = 0
    meta: Dict[str, str] = field(default_factory=dict)
    prompt_tokens: List[int] = field(default_factory=list)


@dataclass
class Score:
    interval: int = 0
    turn: int = 0
    value: float = 0.0


@dataclass
class Decision:
    interval: int = 0
    action: str = ""
    score: float = 0.0
    reference: float = 0.0
    delta: float = 0.0
    rule: str = ""
    children: int = 0


@dataclass
class Node:
    id: int = 0
    step: int = 0
    group: int = 0
    parent: int = 0
    ordinal: int = 0
    fork: int = 0
    base: int = 0
    depth: int = 0
    status: str = ""
    turns: int = 0
    scores: List[Score] = field(default_factory=list)
    decisions: List[Decision] = field(default_factory=list)
    has_reward: bool = False
    reward: float = 0.0
    env_state: Optional[bytes] = None
    worker: str = ""
    attempt: int = 0
    error: str = ""  # why a failed branch failed
    min_policy_version: int = 0  # the oldest and newest weights that sampled its turns (0: not recorded)
    max_policy_version: int = 0

    @property
    def path_len(self) -> int:
        """Turns from the root to the node's last turn."""
        return self.base + self.turns


@dataclass
class NodeInfo:
    node: Node = field(default_factory=Node)
    children: List[int] = field(default_factory=list)


@dataclass
class GroupTree:
    group: Group = field(default_factory=Group)
    nodes: List[Node] = field(default_factory=list)


@dataclass
class Turn:
    """One interaction turn: the action (text, token ids, logprobs) and the
    environment's answer (text, token ids, reward, done)."""
    action: str = ""
    observation: str = ""
    action_tokens: List[int] = field(default_factory=list)
    action_logprobs: List[float] = field(default_factory=list)
    observation_tokens: List[int] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    policy_version: int = 0  # the weights that sampled the action

    def to_json(self, packed: bool = False) -> Dict[str, Any]:
        """The turn as the API reads it; ``packed`` writes its token arrays as
        base64 of their little-endian words (servers of API 1.5 on)."""
        out: Dict[str, Any] = {"action": self.action, "observation": self.observation,
                               "reward": float(self.reward), "done": bool(self.done)}
        if self.policy_version:
            out["policy_version"] = int(self.policy_version)
        for name, kind in (("action_tokens", "I"), ("action_logprobs", "f"), ("observation_tokens", "I")):
            values = getattr(self, name)
            if len(values):
                if packed:
                    out[name] = pack_words(values, kind)
                else:
                    out[name] = [int(t) for t in values] if kind == "I" else [float(x) for x in values]
        return out


@dataclass
class PathTurn(Turn):
    node: int = 0   # the node that stores the turn
    index: int = 0  # its index among that node's own turns

    def turn(self) -> Turn:
        return Turn(self.action, self.observation, list(self.action_tokens), list(self.action_logprobs),
                    list(self.observation_tokens), self.reward, self.done, self.policy_version)


@dataclass
class Segment:
    node: int = 0
    count: int = 0


@dataclass
class Trajectory:
    node: Node = field(default_factory=Node)
    inherited: int = 0  # the first `inherited` turns come from ancestors
    segments: List[Segment] = field(default_factory=list)
    turns: List[PathTurn] = field(default_factory=list)


@dataclass
class Advantage:
    step: int = 0
    group: int = 0
    leaf: int = 0
    outcome: float = 0.0
    rubric_score: float = 0.0
    lambda_: float = field(default=0.0, metadata={"json": "lambda"})
    total: float = 0.0
    mean: float = 0.0
    std: float = 0.0
    advantage: float = 0.0
    rubrics: List[int] = field(default_factory=list)
    zero_variance: bool = False
    zero_variance_after: bool = False


@dataclass
class RubricOrigin:
    step: int = 0
    group: int = 0
    anchors: List[int] = field(default_factory=list)


@dataclass
class RubricUsage:
    activations: int = 0
    last_activation: int = -1
    pairs_judged: int = 0
    last_variance: float = 0.0
    low_var_streak: int = 0
    groups_unlocked: int = 0
    n: float = 0.0
    sum_x: float = 0.0
    sum_y: float = 0.0
    sum_xy: float = 0.0
    sum_xx: float = 0.0
    sum_yy: float = 0.0


@dataclass
class Rubric:
    id: int = 0
    pool: str = ""
    text: str = ""
    feature: str = ""
    origin: RubricOrigin = field(default_factory=RubricOrigin)
    parents: List[int] = field(default_factory=list)
    merged_into: int = 0
    support: int = 0
    variance: float = 0.0
    rho: float = 0.0
    usage: RubricUsage = field(default_factory=RubricUsage)
    created_step: int = 0
    retire_step: int = 0
    retire_reason: str = ""


@dataclass
class Checkpoint:
    step: int = 0
    inline: Optional[bytes] = None
    uri: str = ""
    hash: str = ""
    meta: Dict[str, str] = field(default_factory=dict)
    created_at: int = 0


@dataclass
class Event:
    seq: int = 0
    created_at: int = 0  # unix nanoseconds
    kind: str = ""
    step: int = 0
    group: int = 0
    node: int = 0
    rubric: int = 0
    payload: Any = None  # decoded: the record after the mutation, or the kind's own payload


@dataclass
class EventPage:
    events: List[Event] = field(default_factory=list)
    next: int = 0
    last_seq: int = 0


@dataclass
class RunStats:
    run: str = ""
    groups: int = 0
    nodes: int = 0
    leaves: int = 0
    turns_stored: int = 0
    turns_materialised: int = 0
    prefix_sharing: float = 0.0
    events: int = 0
    bytes: int = 0
    buckets: List[BucketSize] = field(default_factory=list)
    damaged: str = ""


@dataclass
class Stats:
    path: str = ""
    file_bytes: int = 0
    runs: List[RunStats] = field(default_factory=list)


@dataclass
class Task:
    """One prompt of a step; its rollouts form a group."""
    id: str = ""
    prompt: str = ""
    prompt_tokens: List[int] = field(default_factory=list)
    gold: str = ""
    meta: Dict[str, str] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"id": self.id, "prompt": self.prompt}
        if self.prompt_tokens:
            out["prompt_tokens"] = [int(t) for t in self.prompt_tokens]
        if self.gold:
            out["gold"] = self.gold
        if self.meta:
            out["meta"] = dict(self.meta)
        return out


@dataclass
class TurnKey:
    """Identifies the turn being sampled. Draw randomness from ``seed``, ``branch``
    (the branch's place in its tree, independent of node ids and timing) and
    ``path`` (the turn's position in the trajectory), and a resumed or re-leased
    branch samples the same turns."""
    seed: int = 0
    step: int = 0
    group: int = 0
    node: int = 0
    branch: int = 0
    index: int = 0    # among the node's own turns
    path: int = 0     # in the full trajectory
    attempt: int = 0  # retries of the branch so far


@dataclass
class Lease:
    """One branch's current interval, handed to one worker until ``expires_at``:
    sample ``turns`` turns (fewer if the episode ends), then score the branch
    when ``score`` is set, and submit from own-turn index ``from_``."""
    id: str = ""
    worker: str = ""
    node: int = 0
    group: int = 0
    step: int = 0
    interval: int = 0
    attempt: int = 0
    from_: int = field(default=0, metadata={"json": "from"})
    path_len: int = 0
    turns: int = 0
    score: bool = False
    key: TurnKey = field(default_factory=TurnKey)
    task: Task = field(default_factory=Task)
    env_state: Optional[bytes] = None
    expires_at: int = 0  # unix nanoseconds; renew before it (every 0.4 ttl_ms)
    ttl_ms: int = 0
    policy_version: int = 0  # the worker's weights, as it said when leasing
    run_version: int = 0  # the run's current policy version at the grant
    history: List[Turn] = field(default_factory=list)  # the path so far, root first
    history_of: int = 0  # when set: history holds the path from history_from on; the rest is node history_of's held path
    history_from: int = 0


@dataclass
class LeaseState:
    """A lease after a renewal (heartbeat) or a release: ``held`` with its new
    ``expires_at`` (unix nanoseconds), else ``reason`` says why it is gone
    (it expired and may have been handed on, another worker holds it, a
    published policy version voided it, the server restarted, "released")."""
    id: str = ""
    held: bool = False
    expires_at: int = 0
    reason: str = ""


@dataclass
class Submission:
    """A worker's report on a leased branch: its turns, then (once the interval's
    turns are in) its process score, or the error that stopped it. ``reward`` is
    the outcome reward of a branch these turns end."""
    lease: str
    node: int
    from_: int = field(default=0, metadata={"json": "from"})
    turns: List[Turn] = field(default_factory=list)
    env_state: Optional[bytes] = None
    score: Optional[float] = None
    reward: Optional[float] = None
    error: str = ""
    worker: str = ""  # the worker the lease was granted to
    reward_pending: bool = False  # the branch ends with its reward to come (submit_rewards)

    def to_json(self, packed: bool = False) -> Dict[str, Any]:
        out: Dict[str, Any] = {"lease": self.lease, "worker": self.worker, "node": int(self.node), "from": int(self.from_)}
        if self.reward_pending:
            out["reward_pending"] = True
        if self.turns:
            out["turns"] = [t.to_json(packed) if isinstance(t, Turn) else dict(t) for t in self.turns]
        if self.env_state is not None:
            out["env_state"] = base64.b64encode(self.env_state).decode()
        if self.score is not None:
            out["score"] = float(self.score)
        if self.reward is not None:
            out["reward"] = float(self.reward)
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class SubmitResult:
    node: int = 0
    status: str = ""
    turns: int = 0
    attempt: int = 0
    retry: bool = False  # a failure that will be retried


@dataclass
class RoutedDecision:
    node: int = 0
    action: str = ""  # "expand", "survive" or "prune"
    score: float = 0.0
    reference: float = 0.0
    delta: float = 0.0
    rule: str = ""
    children: int = 0
    rank: int = 0
    child_ids: List[int] = field(default_factory=list)


@dataclass
class Routing:
    step: int = 0
    group: int = 0
    interval: int = 0
    decisions: List[RoutedDecision] = field(default_factory=list)
    active: List[int] = field(default_factory=list)


@dataclass
class Submitted:
    results: List[SubmitResult] = field(default_factory=list)
    routed: List[Routing] = field(default_factory=list)
    done: List[int] = field(default_factory=list)  # groups left without an active branch: close them


@dataclass
class OpenStepResult:
    step: int = 0
    groups: List[Group] = field(default_factory=list)


@dataclass
class StepStatus:
    """What a driver waits on: the step is finished when ``open`` is 0; ``done``
    lists the open groups with no active branch left (close them)."""
    step: int = 0
    groups: int = 0
    open: int = 0
    closed: int = 0
    done: List[int] = field(default_factory=list)
    active: int = 0
    leased: int = 0
    awaiting_scores: int = 0  # active branches waiting for a remote process score
    awaiting_rewards: int = 0  # finished branches waiting for their deferred reward
    policy_version: int = 0  # the run's current policy version


@dataclass
class RewardSubmission:
    """A deferred outcome reward for a finished branch that awaits one, or the
    verifier's ``error`` (the leaf is then recorded failed, never given 0)."""
    node: int
    reward: Optional[float] = None
    error: str = ""

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"node": int(self.node)}
        if self.reward is not None:
            out["reward"] = float(self.reward)
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class ScoreSubmission:
    """A process score in [0,1] for a branch that awaits one after its
    interval's K turns (runs with ``remote_scores``), or the scorer's
    ``error`` (the branch fails and is retried like on any scorer failure)."""
    node: int
    interval: int
    score: Optional[float] = None
    error: str = ""

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"node": int(self.node), "interval": int(self.interval)}
        if self.score is not None:
            out["score"] = float(self.score)
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class PendingWork:
    """A branch that waits for work from outside its workers: a remote process
    score (for ``interval``) or its deferred outcome reward. ``since_at`` is
    when the server first saw it waiting and ``due_at`` when it gives up on
    it (unix nanoseconds); ``history`` is its path, root first, when asked for."""
    node: int = 0
    group: int = 0
    step: int = 0
    interval: int = 0
    attempt: int = 0
    path_len: int = 0
    task: Task = field(default_factory=Task)
    since_at: int = 0
    due_at: int = 0
    history: List[Turn] = field(default_factory=list)


@dataclass
class PendingResult:
    """What a step waits for from outside its workers (``Client.pending``)."""
    step: int = 0
    scores: List[PendingWork] = field(default_factory=list)
    rewards: List[PendingWork] = field(default_factory=list)


@dataclass
class CloseGroupResult:
    group: Group = field(default_factory=Group)
    advantages: List[Advantage] = field(default_factory=list)


@dataclass
class CheckpointResult:
    checkpoint: Checkpoint = field(default_factory=Checkpoint)
    run: Run = field(default_factory=Run)


@dataclass
class Scalars:
    """A trainer's own figures of one step (``Client.log``)."""
    step: int = 0
    values: Dict[str, float] = field(default_factory=dict)
    updated_at: int = 0  # unix nanoseconds of the last write


@dataclass
class ScalarsResult:
    scalars: Scalars = field(default_factory=Scalars)


@dataclass
class ScalarsPage:
    names: List[str] = field(default_factory=list)  # every name the steps use, sorted
    steps: List[Scalars] = field(default_factory=list)


@dataclass
class ActiveRubrics:
    step: int = 0
    active: List[Rubric] = field(default_factory=list)


@dataclass
class JudgeNeed:
    """A pair to judge, shown in this order (a first), under an active rubric
    (``rubric`` is its id) or a draft being admitted (``draft`` is its text)."""
    rubric: int = 0
    draft: str = ""
    text: str = ""
    a: int = 0
    b: int = 0


@dataclass
class InduceNeed:
    """Write draft rubrics contrasting ``best`` with ``worst`` and with ``hard`` (node ids)."""
    best: int = 0
    worst: int = 0
    hard: int = 0


@dataclass
class ConsolidateNeed:
    """Abstract the candidate ``drafts`` into general rubrics, each absorbing draft ids."""
    drafts: List[Rubric] = field(default_factory=list)
    public: List[Rubric] = field(default_factory=list)


@dataclass
class ShapeNeeds:
    judge: List[JudgeNeed] = field(default_factory=list)
    induce: Optional[InduceNeed] = None
    consolidate: Optional[ConsolidateNeed] = None


@dataclass
class LeafScore:
    leaf: int = 0
    score: float = 0.0


@dataclass
class ShapeResult:
    complete: bool = False
    needs: ShapeNeeds = field(default_factory=ShapeNeeds)
    leaves: List[int] = field(default_factory=list)
    scores: List[LeafScore] = field(default_factory=list)
    lambda_: float = field(default=0.0, metadata={"json": "lambda"})
    rubrics: List[int] = field(default_factory=list)
    zero_variance: bool = False
    zero_variance_after: bool = False
    unlocked: bool = False
    drafts: int = 0
    admitted: List[int] = field(default_factory=list)
    rejected: int = 0
    supported: List[int] = field(default_factory=list)
    consolidated: bool = False
    new_public: List[int] = field(default_factory=list)
    merged: List[int] = field(default_factory=list)
    retired: List[int] = field(default_factory=list)
