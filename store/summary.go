package store

import (
	"github.com/patrdb/patrdb/model"
	"maps"
	"slices"
)

// Summary returns the run's figures. With counters it reads a few small
// records: the run's totals and, from the newest step back, the per-step
// counters until a step with an open group (all of them with
// SummaryOptions.Steps); a run without them is walked
// (RunSummary.Walked).
func (r *RunTx) Summary(o model.SummaryOptions) (model.RunSummary, error) {
	if r.checking() {
		return r.chk.Summary(o)
	}
	return r.summary(o, nil)
}

// summary is Summary; reach, when set, checks the pages a cursor reads
// through the per-step counters in [lo, hi) before it reads them (hi nil:
// to the end), and reports whether they are sound.
func (r *RunTx) summary(o model.SummaryOptions, reach func(lo, hi []byte) bool) (model.RunSummary, error) {
	info, err := r.Info()
	if err != nil {
		return model.RunSummary{}, err
	}
	s := model.RunSummary{Run: r.id, Status: info.Status, LastStep: info.LastStep, DroppedStep: info.DroppedStep, Events: r.LastSeq()}
	var total counts
	take := func(step uint64, c *counts) error {
		if step == 0 {
			total = *c
			return nil
		}
		if c.OpenGroups > 0 {
			s.OpenStep = max(s.OpenStep, step)
		}
		if o.Steps && c.Groups > 0 {
			s.Steps = append(s.Steps, model.StepSummary{Step: step, Groups: int(c.Groups), OpenGroups: int(c.OpenGroups),
				Nodes: int(c.nodes()), Turns: int(c.Turns), Leaves: int(c.leaves()), Rewarded: int(c.Rewarded),
				MeanReward: c.meanReward(), ZeroVarianceGroups: int(c.ZeroVariance)})
		}
		return nil
	}
	var ok bool
	if o.Steps {
		ok, err = r.storedCounts(take)
	} else {
		ok, err = r.storedTotals(&total, &s.OpenStep, reach)
	}
	if err != nil {
		return s, err
	}
	if !ok {
		s.Walked = true
		byStep, err := r.walkCounts()
		if err != nil {
			return s, err
		}
		for _, step := range slices.Sorted(maps.Keys(byStep)) {
			if err := take(step, byStep[step]); err != nil {
				return s, err
			}
		}
	}
	s.Groups, s.OpenGroups = int(total.Groups), int(total.OpenGroups)
	s.Nodes, s.Leaves, s.Turns = int(total.nodes()), int(total.leaves()), int(total.Turns)
	s.ByStatus = make(map[model.NodeStatus]int, nStatuses)
	for i, st := range statusOrder {
		s.ByStatus[st] = int(total.ByStatus[i])
	}
	s.Frontier = s.ByStatus[model.NodeActive]
	s.TurnsMaterialised = int(total.Materialised)
	if total.Turns > 0 {
		s.PrefixSharing = float64(total.Materialised) / float64(total.Turns)
	}
	s.Rewarded, s.MeanReward = int(total.Rewarded), total.meanReward()
	s.ZeroVarianceGroups = int(total.ZeroVariance)
	if o.Buckets {
		if s.Buckets, err = r.BucketSizes(); err != nil {
			return s, err
		}
		for _, b := range s.Buckets {
			s.Bytes += b.Bytes
		}
	}
	return s, nil
}

func (c *counts) meanReward() *float64 {
	if c.Rewarded == 0 {
		return nil
	}
	m := c.RewardSum / float64(c.Rewarded)
	return &m
}
