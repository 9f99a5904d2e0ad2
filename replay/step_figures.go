package replay

import (
	"slices"
	"sync"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store"
)

// StepMetrics is package api's: the server serves it as it is.
type StepMetrics = api.StepMetrics

// StepFigures computes every step's StepMetrics: the groups from the run's
// per-step counters, the leaves from the advantage records, the pool sizes
// from the event log.
func StepFigures(r *store.RunTx) ([]StepMetrics, error) {
	return new(StepFollower).Figures(r)
}

// StepFollower is StepFigures for a process that asks for one run's
// figures again and again (the server, while a viewer refreshes a live
// run every few seconds): it keeps its place in the event log, so each
// call reads only the events written since the one before, not the whole
// log. It is safe for concurrent use; keep one per run.
type StepFollower struct {
	mu    sync.Mutex
	run   string
	pools PoolTracker
	next  uint64 // the first event not observed yet; 0 before the first call
}

// Figures is StepFigures(r), reading only the events new to the follower.
func (f *StepFollower) Figures(r *store.RunTx) ([]StepMetrics, error) {
	pools, err := f.poolSizes(r)
	if err != nil {
		return nil, err
	}
	byStep := map[uint64]*StepMetrics{}
	get := func(step uint64) *StepMetrics {
		m := byStep[step]
		if m == nil {
			m = &StepMetrics{Step: step}
			byStep[step] = m
		}
		return m
	}
	sum, err := r.Summary(store.SummaryOptions{Steps: true})
	if err != nil {
		return nil, err
	}
	for _, st := range sum.Steps {
		m := get(st.Step)
		m.Groups, m.ClosedGroups = st.Groups, st.Groups-st.OpenGroups
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
		if flags := GroupFlags(advs[i:j]); flags.ZeroVariance {
			m.ZeroVariance++
			if flags.Unlocked() {
				m.Unlocked++
			}
		}
		i = j
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

// poolSizes brings the follower's pool tracker up to r's last event and
// returns the pool counts as each step ended, by step.
func (f *StepFollower) poolSizes(r *store.RunTx) (map[uint64]map[store.RubricPool]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sizes []PoolSizes
	if f.next != 0 && f.run == r.ID() && r.LastSeq() >= f.next-1 {
		next, err := f.pools.observeEvents(r, f.next)
		if err != nil {
			f.next = 0 // start again from the first event next time
			return nil, err
		}
		f.next = next
		sizes = f.pools.SizesSoFar()
	} else {
		// The first call, or a reader older than the follower's place (a
		// request that began before the previous one): read from the
		// start; only a reader as new as the follower moves it on.
		var pt PoolTracker
		next, err := pt.observeEvents(r, 1)
		if err != nil {
			return nil, err
		}
		if f.next == 0 || f.run != r.ID() {
			f.run, f.pools, f.next = r.ID(), pt, next
		}
		sizes = pt.SizesSoFar()
	}
	out := make(map[uint64]map[store.RubricPool]int, len(sizes))
	for _, ps := range sizes {
		out[ps.Step] = map[store.RubricPool]int{store.PoolCandidate: ps.Candidate, store.PoolPublic: ps.Public,
			store.PoolRetired: ps.Retired, store.PoolMerged: ps.Merged}
	}
	return out, nil
}
