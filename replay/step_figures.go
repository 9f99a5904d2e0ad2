package replay

import (
	"github.com/patrdb/patrdb/model"
	"maps"
	"slices"
	"sync"

	"github.com/patrdb/patrdb/store"
)

// StepFigures computes every step's StepMetrics: the groups, leaves and
// mean reward from the run's per-step counters (model.StepSummary, the
// figures every interface prints), success and zero variance from the
// advantage records, the pool sizes from the event log.
func StepFigures(r *store.RunTx) ([]model.StepMetrics, error) {
	return new(StepFollower).Figures(r)
}

// StepFollower is StepFigures for a process that asks for one run's
// figures again and again (the server, while a viewer refreshes a live
// run every few seconds): it keeps its place in the event log, so each
// call reads only the events written since the one before, not the whole
// log, and the advantage records of only the steps those events wrote
// some to. It is safe for concurrent use; keep one per run.
type StepFollower struct {
	mu     sync.Mutex
	run    string
	pools  PoolTracker
	stale  StalenessTracker
	leaves map[uint64]leafFigures // by step, as of next
	next   uint64                 // the first event not observed yet; 0 before the first call
}

// leafFigures are one step's figures from its advantage records (the
// leaves of its closed groups).
type leafFigures struct {
	leaves, wins, zeroVariance, unlocked int
}

// Figures is StepFigures(r), reading only the events new to the follower.
func (f *StepFollower) Figures(r *store.RunTx) ([]model.StepMetrics, error) {
	pools, leaves, stale, err := f.follow(r)
	if err != nil {
		return nil, err
	}
	byStep := map[uint64]*model.StepMetrics{}
	get := func(step uint64) *model.StepMetrics {
		m := byStep[step]
		if m == nil {
			m = &model.StepMetrics{Step: step}
			byStep[step] = m
		}
		return m
	}
	sum, err := r.Summary(model.SummaryOptions{Steps: true})
	if err != nil {
		return nil, err
	}
	for _, st := range sum.Steps {
		m := get(st.Step)
		m.Groups, m.ClosedGroups, m.Leaves = st.Groups, st.Groups-st.OpenGroups, st.Leaves
		if st.MeanReward != nil {
			m.MeanReward = *st.MeanReward
		}
	}
	for st, lf := range leaves {
		m := get(st)
		m.ZeroVariance, m.Unlocked = lf.zeroVariance, lf.unlocked
		if lf.leaves > 0 {
			m.Success = float64(lf.wins) / float64(lf.leaves)
		}
	}
	steps := make([]uint64, 0, len(byStep))
	for st := range byStep {
		steps = append(steps, st)
	}
	slices.Sort(steps)
	out := make([]model.StepMetrics, 0, len(steps))
	last := map[model.RubricPool]int{}
	for _, st := range steps {
		m := byStep[st]
		if m.ClosedGroups > 0 {
			m.ZeroVarianceShare = float64(m.ZeroVariance) / float64(m.ClosedGroups)
		}
		if p, ok := pools[st]; ok {
			last = p
		}
		m.Staleness = stale.Of(st)
		m.Pools = map[model.RubricPool]int{}
		for _, pool := range []model.RubricPool{model.PoolCandidate, model.PoolPublic, model.PoolRetired, model.PoolMerged} {
			m.Pools[pool] = last[pool]
		}
		out = append(out, *m)
	}
	return out, nil
}

// stepLeaves folds advantage records, in key order (by step, then group,
// so each group's records are one run of the slice), into each step's
// figures.
func stepLeaves(advs []model.Advantage, into map[uint64]leafFigures) {
	for i := 0; i < len(advs); {
		j := i
		for j < len(advs) && advs[j].Step == advs[i].Step && advs[j].Group == advs[i].Group {
			j++
		}
		lf := into[advs[i].Step]
		for _, a := range advs[i:j] {
			lf.leaves++
			if a.Outcome > 0 {
				lf.wins++
			}
		}
		if flags := GroupFlags(advs[i:j]); flags.ZeroVariance {
			lf.zeroVariance++
			if flags.Unlocked() {
				lf.unlocked++
			}
		}
		into[advs[i].Step] = lf
		i = j
	}
}

// follow brings the follower up to r's last event: the pool counts as
// each step ended, and each step's leaf figures, by step. The advantage
// records of a step are read again only when an event since the last call
// wrote one of them.
func (f *StepFollower) follow(r *store.RunTx) (map[uint64]map[model.RubricPool]int, map[uint64]leafFigures, *StalenessTracker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var (
		sizes  []PoolSizes
		leaves map[uint64]leafFigures
		stale  *StalenessTracker
	)
	if f.next != 0 && f.run == r.ID() && r.LastSeq() >= f.next-1 {
		changed := map[uint64]bool{}
		next, err := f.pools.observeEvents(r, f.next, changed, &f.stale)
		if err == nil {
			for st := range changed {
				var advs []model.Advantage
				if advs, err = r.Advantages(st, 0); err != nil {
					break
				}
				delete(f.leaves, st)
				stepLeaves(advs, f.leaves)
			}
		}
		if err != nil {
			f.next, f.stale = 0, StalenessTracker{} // start again from the first event next time
			return nil, nil, nil, err
		}
		f.next = next
		sizes, leaves, stale = f.pools.SizesSoFar(), maps.Clone(f.leaves), f.stale.clone()
	} else {
		// The first call, or a reader older than the follower's place (a
		// request that began before the previous one): read from the
		// start; only a reader as new as the follower moves it on.
		var pt PoolTracker
		st := &StalenessTracker{}
		next, err := pt.observeEvents(r, 1, nil, st)
		if err != nil {
			return nil, nil, nil, err
		}
		advs, err := r.Advantages(0, 0)
		if err != nil {
			return nil, nil, nil, err
		}
		leaves = map[uint64]leafFigures{}
		stepLeaves(advs, leaves)
		if f.next == 0 || f.run != r.ID() {
			f.run, f.pools, f.next, f.leaves, f.stale = r.ID(), pt, next, maps.Clone(leaves), *st.clone()
		}
		sizes, stale = pt.SizesSoFar(), st
	}
	out := make(map[uint64]map[model.RubricPool]int, len(sizes))
	for _, ps := range sizes {
		out[ps.Step] = map[model.RubricPool]int{model.PoolCandidate: ps.Candidate, model.PoolPublic: ps.Public,
			model.PoolRetired: ps.Retired, model.PoolMerged: ps.Merged}
	}
	return out, leaves, stale, nil
}
