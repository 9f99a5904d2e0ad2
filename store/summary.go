package store

import (
	"maps"
	"slices"
)

// RunSummary is what a run holds, read from its counters (counts.go)
// without walking its nodes: `patrdb runs`, `patrdb show` and the HTTP API
// all report it.
type RunSummary struct {
	Run      string    `json:"run"`
	Status   RunStatus `json:"status"`
	LastStep uint64    `json:"last_step"` // last completed step
	// DroppedStep is how far the run's old steps were dropped from the
	// file (DropSteps): their records are gone, their counters stay in
	// these figures. 0: none.
	DroppedStep uint64 `json:"dropped_step,omitempty"`
	Groups      int    `json:"groups"`
	OpenGroups  int    `json:"open_groups"`
	OpenStep    uint64 `json:"open_step"` // latest step with an open group; 0 when none
	Nodes       int    `json:"nodes"`
	// ByStatus counts the nodes in every status, zeros included.
	ByStatus map[NodeStatus]int `json:"by_status"`
	Leaves   int                `json:"leaves"`
	Frontier int                `json:"frontier"` // active nodes
	Turns    int                `json:"turns"`    // turns stored, each once however many paths share it
	// TurnsMaterialised is the sum of every leaf's path length: what a
	// per-leaf dump would hold. PrefixSharing is it over Turns (0 when
	// nothing is stored).
	TurnsMaterialised  int      `json:"turns_materialised"`
	PrefixSharing      float64  `json:"prefix_sharing"`
	Rewarded           int      `json:"rewarded"`    // leaves with an outcome reward
	MeanReward         *float64 `json:"mean_reward"` // over the rewarded leaves; null when none
	ZeroVarianceGroups int      `json:"zero_variance_groups"`
	Events             uint64   `json:"events"` // last event sequence number
	// Steps has one row per step with groups, in step order, when asked
	// for (SummaryOptions.Steps).
	Steps []StepSummary `json:"steps,omitempty"`
	// Walked says the run has no counters (it was written before they
	// existed and not since): the figures were computed by reading every
	// node, which costs time in proportion to the run.
	Walked bool `json:"walked,omitempty"`
	// Bytes and Buckets are the run's on-disk footprint, when asked for
	// (SummaryOptions.Buckets): reading them walks every page of the run.
	Bytes   int64        `json:"bytes,omitempty"`
	Buckets []BucketSize `json:"buckets,omitempty"`
}

// StepSummary is one step's row of a RunSummary.
type StepSummary struct {
	Step               uint64   `json:"step"`
	Groups             int      `json:"groups"`
	OpenGroups         int      `json:"open_groups"`
	Nodes              int      `json:"nodes"`
	Turns              int      `json:"turns"` // turns the step's groups sampled, each stored once
	Leaves             int      `json:"leaves"`
	Rewarded           int      `json:"rewarded"`
	MeanReward         *float64 `json:"mean_reward"`
	ZeroVarianceGroups int      `json:"zero_variance_groups"`
}

// SummaryOptions says what a summary includes beyond the run's totals.
type SummaryOptions struct {
	Steps   bool // a row per step
	Buckets bool // bytes per bucket: walks every page of the run
}

// Summary returns the run's figures. With counters it reads a few small
// records; a run without them is walked (RunSummary.Walked).
func (r *RunTx) Summary(o SummaryOptions) (RunSummary, error) {
	info, err := r.Info()
	if err != nil {
		return RunSummary{}, err
	}
	s := RunSummary{Run: r.id, Status: info.Status, LastStep: info.LastStep, DroppedStep: info.DroppedStep, Events: r.LastSeq()}
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
			s.Steps = append(s.Steps, StepSummary{Step: step, Groups: int(c.Groups), OpenGroups: int(c.OpenGroups),
				Nodes: int(c.nodes()), Turns: int(c.Turns), Leaves: int(c.leaves()), Rewarded: int(c.Rewarded),
				MeanReward: c.meanReward(), ZeroVarianceGroups: int(c.ZeroVariance)})
		}
		return nil
	}
	ok, err := r.storedCounts(take)
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
	s.ByStatus = make(map[NodeStatus]int, nStatuses)
	for i, st := range statusOrder {
		s.ByStatus[st] = int(total.ByStatus[i])
	}
	s.Frontier = s.ByStatus[NodeActive]
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
