package rubricpool

import (
	"cmp"
	"math"
	"slices"
)

// RubricUsage is what activation and retirement need to know about a public
// rubric: its running correlation with the outcome, when it was last
// activated (a step number; −1 means never) and how often.
type RubricUsage struct {
	ID             uint64
	Corr           Corr
	LastActivation int64
	Activations    int
}

// never reports whether u has not been activated yet. Any negative step
// counts, so a record written with a different "unset" value still sorts
// first rather than being treated as a very old activation.
func (u RubricUsage) never() bool { return u.LastActivation < 0 }

// SelectActive picks the rubrics to activate this step, in activation order.
// The first is the exploit pick: the highest running correlation (an
// undefined correlation counts as −∞; ties, including "all undefined", go to
// the lowest id). The rest rotate through the pool by least-recent use:
// never-activated rubrics first, then the oldest LastActivation, ties by
// lowest id, so every public rubric keeps being measured and can earn or lose
// its place. It returns fewer ids when the pool is smaller than active and
// nil when active < 1 or the pool is empty. A repeated id is considered once
// (its first entry). The input is not modified.
func SelectActive(public []RubricUsage, active int) []uint64 {
	if active < 1 || len(public) == 0 {
		return nil
	}
	// Drop repeated ids so the same rubric cannot fill two slots.
	pool := make([]RubricUsage, 0, len(public))
	seen := make(map[uint64]struct{}, len(public))
	for _, u := range public {
		if _, dup := seen[u.ID]; dup {
			continue
		}
		seen[u.ID] = struct{}{}
		pool = append(pool, u)
	}

	first, bestRho := 0, math.Inf(-1)
	for i, u := range pool {
		r, ok := u.Corr.Rho()
		if !ok {
			r = math.Inf(-1)
		}
		if i == 0 || r > bestRho || (r == bestRho && u.ID < pool[first].ID) {
			first, bestRho = i, r
		}
	}
	out := make([]uint64, 0, min(active, len(pool)))
	out = append(out, pool[first].ID)

	rest := slices.Delete(pool, first, first+1)
	slices.SortFunc(rest, func(a, b RubricUsage) int {
		switch an, bn := a.never(), b.never(); {
		case an && !bn:
			return -1
		case bn && !an:
			return 1
		case !an && a.LastActivation != b.LastActivation:
			return cmp.Compare(a.LastActivation, b.LastActivation)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	for _, u := range rest {
		if len(out) == active {
			break
		}
		out = append(out, u.ID)
	}
	return out
}
