package replay

import (
	"slices"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store"
)

// StepMetrics is package api's: the server serves it as it is.
type StepMetrics = api.StepMetrics

// StepFigures computes every step's StepMetrics, reading the groups, the
// advantages and (for the pool sizes) the event log once each.
func StepFigures(r *store.RunTx) ([]StepMetrics, error) {
	byStep := map[uint64]*StepMetrics{}
	get := func(step uint64) *StepMetrics {
		m := byStep[step]
		if m == nil {
			m = &StepMetrics{Step: step}
			byStep[step] = m
		}
		return m
	}
	err := r.ForEachGroup(0, func(g store.Group) error {
		m := get(g.Step)
		m.Groups++
		if g.Status == store.GroupClosed {
			m.ClosedGroups++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	advs, err := r.Advantages(0, 0)
	if err != nil {
		return nil, err
	}
	wins := map[uint64]int{}
	sums := map[uint64]float64{}
	// Advantages come grouped (by step, then group), so each group's
	// records are one run of the slice.
	for i := 0; i < len(advs); {
		j := i
		for j < len(advs) && advs[j].Step == advs[i].Step && advs[j].Group == advs[i].Group {
			j++
		}
		m := get(advs[i].Step)
		for _, a := range advs[i:j] {
			m.Leaves++
			sums[a.Step] += a.Outcome
			if a.Outcome > 0 {
				wins[a.Step]++
			}
		}
		if f := GroupFlags(advs[i:j]); f.ZeroVariance {
			m.ZeroVariance++
			if f.Unlocked() {
				m.Unlocked++
			}
		}
		i = j
	}
	pools, err := poolsByStep(r)
	if err != nil {
		return nil, err
	}
	steps := make([]uint64, 0, len(byStep))
	for st := range byStep {
		steps = append(steps, st)
	}
	slices.Sort(steps)
	out := make([]StepMetrics, 0, len(steps))
	last := map[store.RubricPool]int{}
	for _, st := range steps {
		m := byStep[st]
		if m.Leaves > 0 {
			m.Success = float64(wins[st]) / float64(m.Leaves)
			m.MeanReward = sums[st] / float64(m.Leaves)
		}
		if m.ClosedGroups > 0 {
			m.ZeroVarianceShare = float64(m.ZeroVariance) / float64(m.ClosedGroups)
		}
		if p, ok := pools[st]; ok {
			last = p
		}
		m.Pools = map[store.RubricPool]int{}
		for _, pool := range []store.RubricPool{store.PoolCandidate, store.PoolPublic, store.PoolRetired, store.PoolMerged} {
			m.Pools[pool] = last[pool]
		}
		out = append(out, *m)
	}
	return out, nil
}

// poolsByStep is PoolHistory by step: the pool counts as each step
// ended.
func poolsByStep(r *store.RunTx) (map[uint64]map[store.RubricPool]int, error) {
	sizes, err := PoolHistory(r)
	out := make(map[uint64]map[store.RubricPool]int, len(sizes))
	for _, ps := range sizes {
		out[ps.Step] = map[store.RubricPool]int{store.PoolCandidate: ps.Candidate, store.PoolPublic: ps.Public,
			store.PoolRetired: ps.Retired, store.PoolMerged: ps.Merged}
	}
	return out, err
}
