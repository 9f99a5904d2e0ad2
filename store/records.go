package store

// RunStatus is the lifecycle state of a run.
type RunStatus string

const (
	RunRunning  RunStatus = "running"
	RunFinished RunStatus = "finished"
	RunFailed   RunStatus = "failed"
)

// MaxStep is the largest step number. Steps run from 1 to 2^53 - 1: every
// JSON reader reads them exactly (JavaScript's numbers are doubles), and a
// run never takes that many (at a step a second, 285 million years), so no
// checkpointed step leaves a run without a next one (as 2^64 - 1 did).
const MaxStep = 1<<53 - 1

// validStep refuses a step outside 1..MaxStep.
func validStep(step uint64) error {
	if step == 0 || step > MaxStep {
		return invalidf("step %d: steps run from 1 to %d", step, uint64(MaxStep))
	}
	return nil
}

// Run is one training run. Steps are numbered from 1; LastStep 0 means no
// step has completed.
type Run struct {
	_msgpack  struct{}          `msgpack:",as_array"`
	ID        string            `json:"id"`
	Config    []byte            `json:"config"` // JSON of the trainer's tree and rubric configuration, opaque to the store
	Status    RunStatus         `json:"status"`
	LastStep  uint64            `json:"last_step"`
	CreatedAt int64             `json:"created_at"` // unix nanoseconds
	UpdatedAt int64             `json:"updated_at"`
	Meta      map[string]string `json:"meta,omitempty"`
	// PolicyVersion is the run's current policy version: the newest
	// weights the trainer published (RunTx.PublishVersion), against which
	// the staleness of sampled turns is measured. 0 until one is published
	// (format 4 on).
	PolicyVersion uint64 `json:"policy_version"`
	// DroppedStep and DroppedSeq say how far DropSteps deleted the run's
	// old steps: every record of the steps up to DroppedStep, and events
	// up to DroppedSeq that those records or later versions made
	// redundant (drop.go). Zero: nothing was dropped.
	DroppedStep uint64 `json:"dropped_step,omitempty"`
	DroppedSeq  uint64 `json:"dropped_seq,omitempty"`
}

// GroupStatus is open while the tree grows and closed once its advantages
// are written.
type GroupStatus string

const (
	GroupOpen   GroupStatus = "open"
	GroupClosed GroupStatus = "closed"
)

// Group is one task's rollout tree within a step.
type Group struct {
	_msgpack struct{}          `msgpack:",as_array"`
	ID       uint64            `json:"id"`
	Step     uint64            `json:"step"`
	Task     string            `json:"task"`
	Prompt   string            `json:"prompt"`
	Gold     string            `json:"gold,omitempty"` // reference answer, for outcome measures such as token F1
	Roots    []uint64          `json:"roots"`
	Status   GroupStatus       `json:"status"`
	Interval int               `json:"interval"` // intervals fully committed; a resume continues from here
	Meta     map[string]string `json:"meta,omitempty"`
	// PromptTokens are the prompt's token ids, the start of every leaf's
	// training sequence. Stored packed like turn tokens (format 2 on).
	PromptTokens TokenIDs `json:"prompt_tokens,omitempty"`
}

// NodeStatus is the lifecycle state of a node. Active nodes are exactly the
// frontier; every other status is final except Failed, which may be retried.
type NodeStatus string

const (
	NodeActive    NodeStatus = "active"
	NodeExpanded  NodeStatus = "expanded"
	NodeCompleted NodeStatus = "completed"
	NodePruned    NodeStatus = "pruned"
	NodeTruncated NodeStatus = "truncated"
	NodeFailed    NodeStatus = "failed"
)

// Valid reports whether s is one of the known statuses.
func (s NodeStatus) Valid() bool {
	switch s {
	case NodeActive, NodeExpanded, NodeCompleted, NodePruned, NodeTruncated, NodeFailed:
		return true
	}
	return false
}

// Leaf reports whether a node in this status is a leaf of its group: one
// whose outcome reward enters the advantages.
func (s NodeStatus) Leaf() bool {
	return s == NodeCompleted || s == NodePruned || s == NodeTruncated
}

// canMove is the node lifecycle: active → any final status; failed → active
// for a retry. Nothing else moves.
func (s NodeStatus) canMove(to NodeStatus) bool {
	switch s {
	case NodeActive:
		return to != NodeActive
	case NodeFailed:
		return to == NodeActive
	}
	return false
}

// Score is one process score of a node, taken at the end of an interval.
type Score struct {
	_msgpack struct{} `msgpack:",as_array"`
	Interval int      `json:"interval"`
	Turn     int      `json:"turn"` // path length (turns from the root) when scored
	Value    float64  `json:"value"`
}

// Routing actions a Decision may carry.
const (
	ActionExpand  = "expand"
	ActionSurvive = "survive"
	ActionPrune   = "prune"
)

// Decision is a routing decision with the values that produced it.
type Decision struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Interval  int      `json:"interval"`
	Action    string   `json:"action"` // ActionExpand, ActionSurvive or ActionPrune
	Score     float64  `json:"score"`
	Reference float64  `json:"reference"` // max or median score of the group's branches
	Delta     float64  `json:"delta"`
	Rule      string   `json:"rule"`
	Children  int      `json:"children,omitempty"`
}

// Node is a partial trajectory: its own turns plus a prefix inherited from
// its parent. Parent 0 marks a root branch.
type Node struct {
	_msgpack  struct{}   `msgpack:",as_array"`
	ID        uint64     `json:"id"`
	Step      uint64     `json:"step"`
	Group     uint64     `json:"group"`
	Parent    uint64     `json:"parent"`
	Ordinal   int        `json:"ordinal"` // position among its siblings; (group, parent, ordinal) is unique
	Fork      int        `json:"fork"`    // how many of the parent's own turns it inherits
	Base      int        `json:"base"`    // turns inherited from all ancestors: parent.Base + Fork
	Depth     int        `json:"depth"`   // 0 for a root branch
	Status    NodeStatus `json:"status"`
	Turns     int        `json:"turns"` // own turns stored
	Scores    []Score    `json:"scores,omitempty"`
	Decisions []Decision `json:"decisions,omitempty"`
	HasReward bool       `json:"has_reward"`
	Reward    float64    `json:"reward"`
	EnvState  []byte     `json:"env_state,omitempty"` // opaque reference the Env can restore from
	Worker    string     `json:"worker,omitempty"`
	Attempt   int        `json:"attempt"`
	// Error is why the node last failed (its policy, env or scorer call),
	// kept after a retry so the history shows it (format 2 on).
	Error string `json:"error,omitempty"`
	// MinVersion and MaxVersion are the oldest and newest policy versions
	// of the node's own turns (0 when none say), so staleness is known
	// without reading a turn (format 2 on).
	MinVersion uint64 `json:"min_policy_version,omitempty"`
	MaxVersion uint64 `json:"max_policy_version,omitempty"`
	// TurnRanges say where the node's own turns are stored (format 3 on;
	// nil in older files, whose turns are keyed by node and index). A
	// storage detail, not part of the JSON vocabulary.
	TurnRanges TurnRanges `json:"-"`
}

// PathLen is the number of turns from the root to the node's last turn.
func (n *Node) PathLen() int { return n.Base + n.Turns }

// AwaitsReward reports whether n finished (completed or truncated) with its
// outcome reward still to come: a verifier or a remote reward model
// delivers it later. Such a leaf holds its group open.
func (n *Node) AwaitsReward() bool {
	return (n.Status == NodeCompleted || n.Status == NodeTruncated) && !n.HasReward
}

// Turn is one interaction turn. Token ids and logprobs are stored packed
// little-endian, not as msgpack arrays.
type Turn struct {
	Action            string    `json:"action"`
	ActionTokens      []uint32  `json:"action_tokens,omitempty"`
	ActionLogprobs    []float32 `json:"action_logprobs,omitempty"`
	Observation       string    `json:"observation"`
	ObservationTokens []uint32  `json:"observation_tokens,omitempty"`
	Reward            float64   `json:"reward"`
	Done              bool      `json:"done"`
	// PolicyVersion is the version of the policy weights that sampled the
	// action (the trainer's own counter, e.g. its optimizer step); 0 when
	// the writer did not say. Staleness is current version − this.
	PolicyVersion uint64 `json:"policy_version,omitempty"`
}

// PathTurn is a turn placed in a materialised trajectory.
type PathTurn struct {
	Turn
	Node  uint64 `json:"node"`  // the node that stores the turn
	Index int    `json:"index"` // the turn's index among that node's own turns
}

// Advantage is the GRPO record of one leaf of a group.
type Advantage struct {
	_msgpack          struct{} `msgpack:",as_array"`
	Step              uint64   `json:"step"`
	Group             uint64   `json:"group"`
	Leaf              uint64   `json:"leaf"`
	Outcome           float64  `json:"outcome"`
	RubricScore       float64  `json:"rubric_score"` // centred within the group
	Lambda            float64  `json:"lambda"`
	Total             float64  `json:"total"` // Outcome + Lambda*RubricScore
	Mean              float64  `json:"mean"`
	Std               float64  `json:"std"`
	Advantage         float64  `json:"advantage"`
	Rubrics           []uint64 `json:"rubrics,omitempty"`
	ZeroVariance      bool     `json:"zero_variance"`       // of the outcome rewards, before shaping
	ZeroVarianceAfter bool     `json:"zero_variance_after"` // of the totals, after shaping
}

// Unlocked reports whether rubric shaping made the leaf's group
// informative: its outcome rewards had zero variance, its shaped totals
// do not.
func (a Advantage) Unlocked() bool { return a.ZeroVariance && !a.ZeroVarianceAfter }

// RubricPool is the pool a rubric is in.
type RubricPool string

const (
	PoolCandidate RubricPool = "candidate"
	PoolPublic    RubricPool = "public"
	PoolRetired   RubricPool = "retired"
	PoolMerged    RubricPool = "merged"
)

// Valid reports whether p is a known pool.
func (p RubricPool) Valid() bool {
	switch p {
	case PoolCandidate, PoolPublic, PoolRetired, PoolMerged:
		return true
	}
	return false
}

// canMove: candidates are consolidated (merged), promoted or dropped
// (retired); public rubrics retire; retired and merged are final.
func (p RubricPool) canMove(to RubricPool) bool {
	switch p {
	case PoolCandidate:
		return to == PoolMerged || to == PoolPublic || to == PoolRetired
	case PoolPublic:
		return to == PoolRetired
	}
	return false
}

// RubricOrigin says where a draft rubric was induced.
type RubricOrigin struct {
	_msgpack struct{} `msgpack:",as_array"`
	Step     uint64   `json:"step"`
	Group    uint64   `json:"group"`
	Anchors  []uint64 `json:"anchors,omitempty"` // tau+, tau-worst, tau-hard node ids
}

// RubricUsage holds the usage statistics of a public rubric. The running
// sums let its Pearson correlation with the outcome survive restarts exactly.
type RubricUsage struct {
	_msgpack       struct{} `msgpack:",as_array"`
	Activations    int      `json:"activations"`
	LastActivation int64    `json:"last_activation"` // step; -1 never
	PairsJudged    int      `json:"pairs_judged"`
	LastVariance   float64  `json:"last_variance"`
	LowVarStreak   int      `json:"low_var_streak"`
	GroupsUnlocked int      `json:"groups_unlocked"`
	N              float64  `json:"n"`
	SumX           float64  `json:"sum_x"`
	SumY           float64  `json:"sum_y"`
	SumXY          float64  `json:"sum_xy"`
	SumXX          float64  `json:"sum_xx"`
	SumYY          float64  `json:"sum_yy"`
}

// Rubric is one entry of the ARBOR rubric buffer.
type Rubric struct {
	_msgpack     struct{}     `msgpack:",as_array"`
	ID           uint64       `json:"id"`
	Pool         RubricPool   `json:"pool"`
	Text         string       `json:"text"`
	Feature      string       `json:"feature,omitempty"` // optional machine key of what the rubric judges
	Origin       RubricOrigin `json:"origin"`
	Parents      []uint64     `json:"parents,omitempty"`     // drafts a public rubric consolidates
	MergedInto   uint64       `json:"merged_into,omitempty"` // for a merged draft: the public rubric that absorbed it
	Support      int          `json:"support"`
	Variance     float64      `json:"variance"` // admission figures
	Rho          float64      `json:"rho"`
	Usage        RubricUsage  `json:"usage"`
	CreatedStep  uint64       `json:"created_step"`
	RetireStep   uint64       `json:"retire_step,omitempty"`
	RetireReason string       `json:"retire_reason,omitempty"`
}

// Checkpoint is the trainer's state after a step: small state inline, or a
// reference to external weights (model weights belong on a file system).
type Checkpoint struct {
	_msgpack  struct{}          `msgpack:",as_array"`
	Step      uint64            `json:"step"`
	Inline    []byte            `json:"inline,omitempty"`
	URI       string            `json:"uri,omitempty"`
	Hash      string            `json:"hash,omitempty"`
	Meta      map[string]string `json:"meta,omitempty"`
	CreatedAt int64             `json:"created_at"`
}

// EventKind names a mutation.
type EventKind string

// Event kinds written by the store. Packages above add their own kinds with
// RunTx.AppendEvent (e.g. "rubric.judge").
const (
	EvRunCreate    EventKind = "run.create"
	EvRunStatus    EventKind = "run.status"
	EvRunVersion   EventKind = "run.version"
	EvGroupOpen    EventKind = "group.open"
	EvGroupUpdate  EventKind = "group.update"
	EvGroupClose   EventKind = "group.close"
	EvNodeAdd      EventKind = "node.add"
	EvTurns        EventKind = "node.turns"
	EvNodeScore    EventKind = "node.score"
	EvNodeRoute    EventKind = "node.route"
	EvNodeStatus   EventKind = "node.status"
	EvNodeReward   EventKind = "node.reward"
	EvNodeEnvState EventKind = "node.env"
	EvAdvantage    EventKind = "adv.put"
	EvRubricPut    EventKind = "rubric.put"
	EvRubricUpdate EventKind = "rubric.update"
	EvRubricMove   EventKind = "rubric.move"
	EvCheckpoint   EventKind = "ckpt.put"
)

// Event is one entry of a run's log. For the store's own kinds Payload is
// the msgpack of the record after the mutation (a Node, Group, Rubric, ...;
// for EvTurns a TurnsPayload), so a reader can rebuild any record as it was
// after any event; see DecodePayload.
type Event struct {
	_msgpack struct{}  `msgpack:",as_array"`
	Seq      uint64    `json:"seq"`
	Time     int64     `json:"created_at"` // unix nanoseconds
	Kind     EventKind `json:"kind"`
	Step     uint64    `json:"step,omitempty"`
	Group    uint64    `json:"group,omitempty"`
	Node     uint64    `json:"node,omitempty"`
	Rubric   uint64    `json:"rubric,omitempty"`
	Payload  []byte    `json:"payload,omitempty"`
}

// TurnsPayload is the payload of an EvTurns event: the range of own-turn
// indexes written, and the node's turn count and policy-version range
// after the write (format 2 added the versions; format 1 wrote 3 fields),
// and the turn sequence number of the first turn past the node's old count
// (format 3; 0 when the write only rewrote turns, or in older files), and
// the oldest policy version among the turns written (format 4; 0 when none
// says): with the run's version at the event's place in the log, how stale
// they were when sampled.
type TurnsPayload struct {
	_msgpack   struct{} `msgpack:",as_array"`
	From       int      `json:"from"`
	Count      int      `json:"count"`
	Turns      int      `json:"turns"`
	MinVersion uint64   `json:"min_policy_version,omitempty"`
	MaxVersion uint64   `json:"max_policy_version,omitempty"`
	Seq        uint64   `json:"-"` // where the new turns are stored: not part of the JSON vocabulary
	Oldest     uint64   `json:"oldest_policy_version,omitempty"`
}

// Apply sets what the payload records on the node it was written for (the
// node as it was before the write).
func (p *TurnsPayload) Apply(n *Node) {
	if p.Seq != 0 && p.Turns > n.Turns {
		n.TurnRanges = n.TurnRanges.extend(p.Seq, p.Turns-n.Turns)
	}
	n.Turns, n.MinVersion, n.MaxVersion = p.Turns, p.MinVersion, p.MaxVersion
}
