package model

import "slices"

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

// CanMove is the node lifecycle: active → any final status; failed →
// active for a retry. Nothing else moves.
func (s NodeStatus) CanMove(to NodeStatus) bool {
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

// Action is what routing does with one active branch; a Decision records
// it.
type Action string

const (
	// ActionExpand replaces the branch by Children new branches forked at
	// its last turn; the parent itself stops being active.
	ActionExpand Action = "expand"
	// ActionSurvive keeps the branch active for the next interval.
	ActionSurvive Action = "survive"
	// ActionPrune ends the branch; it stays in the group as a leaf (a
	// negative).
	ActionPrune Action = "prune"
)

// Decision is a routing decision with the values that produced it.
type Decision struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Interval  int      `json:"interval"`
	Action    Action   `json:"action"`
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
	// Worker is what the caller of store.RunTx.AddNode named in
	// NodeSpec.Worker. The tree coordinator leaves it empty: a branch may
	// pass through many workers, and which one holds it now is its
	// lease's, kept in the coordinator's memory, not in the record.
	Worker  string `json:"worker,omitempty"`
	Attempt int    `json:"attempt"`
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

// TurnRange is a run of a node's own turns stored under consecutive turn
// sequence numbers Seq, Seq+1, ..., Seq+Count-1 (format 3 on). A node's
// ranges, in order, hold its own turns 0, 1, 2, ...
type TurnRange struct {
	Seq   uint64
	Count int
}

// TurnRanges are a node's turn ranges. A branch appends a few turns per
// commit while its siblings append theirs, so it gets one range per
// commit; they are stored packed — one bin value of uvarint pairs, the gap
// from the previous range's end and the count — a couple of bytes each.
type TurnRanges []TurnRange

// Total is how many turns the ranges hold.
func (rs TurnRanges) Total() int {
	n := 0
	for _, r := range rs {
		n += r.Count
	}
	return n
}

// Extend returns rs with count turns from seq on, the last range grown
// when seq follows it. rs is left as it was: a node's ranges are shared
// with its earlier versions.
func (rs TurnRanges) Extend(seq uint64, count int) TurnRanges {
	if count <= 0 {
		return rs
	}
	if n := len(rs); n > 0 && rs[n-1].Seq+uint64(rs[n-1].Count) == seq {
		out := slices.Clone(rs)
		out[n-1].Count += count
		return out
	}
	return append(slices.Clip(rs), TurnRange{Seq: seq, Count: count})
}
