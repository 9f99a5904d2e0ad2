package server

import (
	"net/http"

	"github.com/patrdb/patrdb/store"
)

// StepMetrics is one step of GET /api/v1/runs/{run}/steps: what the
// viewer's charts plot.
type StepMetrics struct {
	Step         uint64 `json:"step"`
	Groups       int    `json:"groups"`
	ClosedGroups int    `json:"closed_groups"`
	Leaves       int    `json:"leaves"` // leaves with an advantage record (closed groups)
	// Success is the share of those leaves whose outcome reward is > 0 (a
	// FrozenLake goal, a passing SWE patch); MeanReward their mean outcome.
	Success           float64 `json:"success"`
	MeanReward        float64 `json:"mean_reward"`
	ZeroVariance      int     `json:"zero_variance_groups"` // closed groups whose outcome rewards were all equal
	ZeroVarianceShare float64 `json:"zero_variance_share"`  // ZeroVariance / ClosedGroups
	Unlocked          int     `json:"unlocked_groups"`      // of those, groups rubric shaping made informative
	// Pools counts the rubrics of each pool as the step ended: after the
	// last event logged before the next step's first group opened.
	Pools map[store.RubricPool]int `json:"pools"`
}

func (s *server) stepMetrics(w http.ResponseWriter, r *http.Request) error {
	out := struct {
		Steps []StepMetrics `json:"steps"`
	}{Steps: []StepMetrics{}}
	err := s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out.Steps, err = stepMetrics(rt)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// stepMetrics reads the groups, the advantages and (for the pool sizes) the
// event log once each.
func stepMetrics(r *store.RunTx) ([]StepMetrics, error) {
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
	type groupKey struct{ step, group uint64 }
	seen := map[groupKey]bool{}
	wins := map[uint64]int{}
	sums := map[uint64]float64{}
	for _, a := range advs {
		m := get(a.Step)
		m.Leaves++
		sums[a.Step] += a.Outcome
		if a.Outcome > 0 {
			wins[a.Step]++
		}
		if k := (groupKey{a.Step, a.Group}); !seen[k] {
			seen[k] = true
			if a.ZeroVariance {
				m.ZeroVariance++
				if !a.ZeroVarianceAfter {
					m.Unlocked++
				}
			}
		}
	}
	pools, err := poolsByStep(r)
	if err != nil {
		return nil, err
	}
	steps := sortedIDs(byStep)
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

// poolsByStep replays the rubric events of the log: the pool counts as
// each step ended. A step begins with its first group.open event.
func poolsByStep(r *store.RunTx) (map[uint64]map[store.RubricPool]int, error) {
	out := map[uint64]map[store.RubricPool]int{}
	pool := map[uint64]store.RubricPool{}
	var cur uint64
	snapshot := func() {
		if cur == 0 {
			return
		}
		c := map[store.RubricPool]int{}
		for _, p := range pool {
			c[p]++
		}
		out[cur] = c
	}
	err := r.Events(1, func(e store.Event) error {
		switch e.Kind {
		case store.EvGroupOpen:
			if e.Step > cur {
				snapshot()
				cur = e.Step
			}
		case store.EvRubricPut, store.EvRubricUpdate, store.EvRubricMove:
			var rb store.Rubric
			if err := store.DecodePayload(e, &rb); err != nil {
				return err
			}
			pool[rb.ID] = rb.Pool
		}
		return nil
	})
	snapshot()
	return out, err
}
