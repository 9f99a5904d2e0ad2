package rollout

import "github.com/patrdb/patrdb/store"

// Action is what routing does with one active branch. Its values are the
// store's action words (store.ActionExpand …), so a stored decision and a
// routed one compare equal.
type Action string

const (
	// Expand replaces the branch by Children new branches forked at its last
	// turn; the parent itself stops being active.
	Expand Action = store.ActionExpand
	// Survive keeps the branch active for the next interval.
	Survive Action = store.ActionSurvive
	// Prune ends the branch; it stays in the group as a leaf (a negative).
	Prune Action = store.ActionPrune
)

// Decision is the routing outcome for one branch with the values that produced it.
type Decision struct {
	Node      uint64  `json:"node"`
	Action    Action  `json:"action"`
	Score     float64 `json:"score"`     // the score routing used (a NaN input is recorded as 0, see Route)
	Reference float64 `json:"reference"` // max_j s_j or the median, whichever the rule uses
	Delta     float64 `json:"delta"`
	Rule      string  `json:"rule"`               // one of tree's Rule* constants
	Children  int     `json:"children,omitempty"` // number of children for Expand (M, or fewer under the width cap); 0 otherwise
	Rank      int     `json:"rank"`               // 0-based rank by score desc then node id asc
}

// Record is d as the store keeps it, routed at the end of interval; the
// node id and rank are not stored (the node is the record's key, the rank
// follows from the group's scores).
func (d Decision) Record(interval int) store.Decision {
	return store.Decision{Interval: interval, Action: string(d.Action), Score: d.Score, Reference: d.Reference,
		Delta: d.Delta, Rule: d.Rule, Children: d.Children}
}
