package tree

import (
	"math"
	"sort"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// Values of Decision.Rule. They are stored with every decision so that a
// reader can see why a branch went where it did without re-running Route.
const (
	RuleMax      = "max"       // pruned: s < max_j s_j − Delta
	RuleMedian   = "median"    // pruned: s < median_j s_j − Delta
	RuleRepeat   = "repeat"    // pruned: RepeatRun >= RepeatPrune
	RuleTop      = "top"       // expanded: among the TopExpand best survivors
	RuleWidthCap = "width-cap" // would have expanded, but MaxActive left room for fewer than 2 children
	RuleSurvive  = "survive"   // neither pruned nor expanded
)

// Branch is one still-active branch of a group at the end of an interval.
type Branch struct {
	Node      uint64  // node id; ties break by ascending node id
	Score     float64 // process score in [0,1]
	RepeatRun int     // identical actions in a row at the end of its path
}

// Route decides, for every branch of one group, whether it is expanded,
// survives or is pruned (docs/methods.md, PaTR step 4). It is pure: it reads only
// its arguments, does not modify branches, and the same inputs always give the
// same decisions, which is what lets replay re-run it on recorded scores.
// Decisions come back in the order of branches; empty input gives nil.
//
// In order:
//
//  1. Reference: max_j s_j (PruneMax) or the median (PruneMedian; for an even
//     count the mean of the two middle values), over all branches given,
//     including those that will be pruned for repeating.
//  2. Prune: RepeatPrune > 0 && RepeatRun >= RepeatPrune (rule "repeat",
//     checked first), else s < Reference − Delta (rule "max" or "median").
//     Scores and Delta are usually decimals, which binary floating point
//     only approximates: 0.8 − 0.2 computes to 0.6000000000000001, which
//     would prune a branch scored exactly 0.6. So a branch within 1e-9 of
//     the boundary counts as on it and is kept; the margin is far below
//     any meaningful score difference.
//  3. Rank every branch by score descending, then node id ascending (then
//     input position, so duplicate ids stay deterministic). The first
//     TopExpand non-pruned branches in rank order expand into M children
//     (rule "top"); the other non-pruned branches survive (rule "survive").
//  4. Width cap (MaxActive > 0): the active set after routing, survivors plus
//     all children, must not exceed MaxActive. Children are allotted in rank
//     order; an expansion shrinks to the children that still fit, and becomes
//     a survivor (rule "width-cap") when that would leave it fewer than 2
//     children and fewer than M, because a single child only renames the
//     branch. If the survivors alone already exceed MaxActive nothing
//     expands; branches are never pruned to make room.
//
// Scores are expected in [0,1] (the store rejects others). A NaN score would
// make ordering undefined, so it is treated as 0, the worst legal score, and
// recorded as 0 in Decision.Score. Under NoScoring (GRPO) there is no routing:
// every branch survives with rule "survive" so every trajectory runs to its
// end. Route assumes cfg passed Validate; an unknown PruneRule acts as
// PruneMax and a negative TopExpand as 0, so Route never panics.
func Route(branches []Branch, cfg Config) []rollout.Decision {
	n := len(branches)
	if n == 0 {
		return nil
	}

	scores := make([]float64, n)
	for i, b := range branches {
		scores[i] = b.Score
		if math.IsNaN(b.Score) {
			scores[i] = 0
		}
	}
	ref, pruneRule := reference(scores, cfg.PruneRule)

	// order[r] is the input index of the branch with rank r.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ia, ib := order[a], order[b]
		if scores[ia] != scores[ib] {
			return scores[ia] > scores[ib]
		}
		return branches[ia].Node < branches[ib].Node
	})

	out := make([]rollout.Decision, n)
	for r, i := range order {
		out[i] = rollout.Decision{
			Node:      branches[i].Node,
			Action:    model.ActionSurvive,
			Score:     scores[i],
			Reference: ref,
			Delta:     cfg.Delta,
			Rule:      RuleSurvive,
			Rank:      r,
		}
	}
	if cfg.NoScoring {
		return out
	}

	kept := 0 // non-pruned branches: each counts 1 toward the active set as a survivor
	for i, b := range branches {
		switch {
		case cfg.RepeatPrune > 0 && b.RepeatRun >= cfg.RepeatPrune:
			out[i].Action, out[i].Rule = model.ActionPrune, RuleRepeat
		case scores[i] < ref-cfg.Delta-1e-9:
			out[i].Action, out[i].Rule = model.ActionPrune, pruneRule
		default:
			kept++
		}
	}

	// room is how many more active branches the cap allows beyond the
	// non-pruned ones; expanding into c children costs c−1 of it, since the
	// parent stops being active.
	room := math.MaxInt
	if cfg.MaxActive > 0 {
		room = cfg.MaxActive - kept
	}
	left := max(cfg.TopExpand, 0)
	for _, i := range order {
		if left == 0 {
			break
		}
		if out[i].Action == model.ActionPrune {
			continue
		}
		left--
		c := cfg.M
		if room < c-1 {
			c = max(room+1, 0)
		}
		if c < cfg.M && c < 2 {
			out[i].Rule = RuleWidthCap
			continue
		}
		if c < 1 { // only reachable with an invalid M < 1
			continue
		}
		out[i].Action, out[i].Rule, out[i].Children = model.ActionExpand, RuleTop, c
		room -= c - 1
	}
	return out
}

// reference returns the value scores are compared against under rule, and
// the Rule string a score-based prune records. It sorts a copy so the
// caller's slice keeps input order.
func reference(scores []float64, rule PruneRule) (float64, string) {
	if rule == PruneMedian {
		s := append([]float64(nil), scores...)
		sort.Float64s(s)
		mid := len(s) / 2
		if len(s)%2 == 1 {
			return s[mid], RuleMedian
		}
		return (s[mid-1] + s[mid]) / 2, RuleMedian
	}
	best := scores[0]
	for _, s := range scores[1:] {
		best = max(best, s)
	}
	return best, RuleMax
}

// ActiveAfter is the number of active branches once decisions are applied:
// one per survivor plus every child of every expansion. The driver uses it
// to size the next interval; tests use it to check the width cap.
func ActiveAfter(decisions []rollout.Decision) int {
	n := 0
	for _, d := range decisions {
		switch d.Action {
		case model.ActionSurvive:
			n++
		case model.ActionExpand:
			n += d.Children
		}
	}
	return n
}
