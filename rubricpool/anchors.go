package rubricpool

import "math"

// Scored is one trajectory of a query group with its outcome (token-level F1
// against the gold answer, or whatever outcome the trainer ranks by).
type Scored struct {
	Node    uint64
	Outcome float64
}

// Anchors are the three trajectories contrastive induction compares: the
// inducer contrasts (Best, Worst) and (Best, Hard).
type Anchors struct {
	Best, Worst, Hard uint64
}

// PickAnchors chooses tau+ (highest outcome), tau-worst (lowest outcome among
// the others) and tau-hard (highest outcome among the rest, the near-miss that
// makes the contrast informative). Every tie goes to the lowest node id so a
// replay picks the same anchors whatever order the group was stored in.
//
// The three anchors are always distinct trajectories: in a group whose
// outcomes are all equal, Best is the lowest id, Worst the next and Hard the
// third. Whether such a group is worth inducing from is the caller's call.
//
// It returns false when the group has fewer than 3 trajectories, when a
// node id repeats (the same trajectory would be contrasted with itself) or
// when an outcome is NaN or infinite (no order is defined).
func PickAnchors(group []Scored) (Anchors, bool) {
	if len(group) < 3 {
		return Anchors{}, false
	}
	seen := make(map[uint64]struct{}, len(group))
	for _, s := range group {
		if math.IsNaN(s.Outcome) || math.IsInf(s.Outcome, 0) {
			return Anchors{}, false
		}
		if _, dup := seen[s.Node]; dup {
			return Anchors{}, false
		}
		seen[s.Node] = struct{}{}
	}

	// pick returns the index of the preferred element among those not
	// excluded; better reports whether a should beat b on outcome alone.
	pick := func(better func(a, b float64) bool, exclude ...int) int {
		best := -1
	next:
		for i, s := range group {
			for _, e := range exclude {
				if i == e {
					continue next
				}
			}
			if best < 0 {
				best = i
				continue
			}
			b := group[best]
			if better(s.Outcome, b.Outcome) || (s.Outcome == b.Outcome && s.Node < b.Node) {
				best = i
			}
		}
		return best
	}
	higher := func(a, b float64) bool { return a > b }
	lower := func(a, b float64) bool { return a < b }

	bi := pick(higher)
	wi := pick(lower, bi)
	hi := pick(higher, bi, wi)
	return Anchors{Best: group[bi].Node, Worst: group[wi].Node, Hard: group[hi].Node}, true
}
