package rollout

import "github.com/patrdb/patrdb/model"

// Decision is the routing outcome for one branch with the values that produced it.
type Decision struct {
	Node      uint64       `json:"node"`
	Action    model.Action `json:"action"`
	Score     float64      `json:"score"`     // the score routing used (a NaN input is recorded as 0, see Route)
	Reference float64      `json:"reference"` // max_j s_j or the median, whichever the rule uses
	Delta     float64      `json:"delta"`
	Rule      string       `json:"rule"`               // one of tree's Rule* constants
	Children  int          `json:"children,omitempty"` // number of children for Expand (M, or fewer under the width cap); 0 otherwise
	Rank      int          `json:"rank"`               // 0-based rank by score desc then node id asc
}

// Record is d as the store keeps it, routed at the end of interval; the
// node id and rank are not stored (the node is the record's key, the rank
// follows from the group's scores).
func (d Decision) Record(interval int) model.Decision {
	return model.Decision{Interval: interval, Action: d.Action, Score: d.Score, Reference: d.Reference,
		Delta: d.Delta, Rule: d.Rule, Children: d.Children}
}
