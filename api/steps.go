package api

import "github.com/patrdb/patrdb/store"

// StepMetrics are one step's outcome figures, the points of a run's
// learning curves (the viewer's charts, GET /api/v1/runs/{run}/steps).
type StepMetrics struct {
	Step         uint64 `json:"step"`
	Groups       int    `json:"groups"`
	ClosedGroups int    `json:"closed_groups"`
	// Leaves are the step's ended branches (completed, pruned, truncated)
	// in open and closed groups; MeanReward the mean outcome reward of
	// those that have one (0 when none): the figures GET /runs, patrdb
	// show and patrdb stats print (docs/json.md). Success is the share of
	// the closed groups' leaves (those with an advantage record) whose
	// outcome reward is > 0 (a FrozenLake goal, a passing SWE patch).
	Leaves            int     `json:"leaves"`
	Success           float64 `json:"success"`
	MeanReward        float64 `json:"mean_reward"`
	ZeroVariance      int     `json:"zero_variance_groups"` // closed groups whose outcome rewards were all equal
	ZeroVarianceShare float64 `json:"zero_variance_share"`  // ZeroVariance / ClosedGroups
	Unlocked          int     `json:"unlocked_groups"`      // of those, groups rubric shaping made informative
	// Pools counts the rubrics of each pool as the step ended
	// (PoolTracker's rule: an event belongs to the highest step any event
	// so far carried).
	Pools map[store.RubricPool]int `json:"pools"`
	Staleness
}

// Staleness is how many policy versions behind the run's current one a
// step's data was (replay.StalenessTracker computes it): its turns when
// they were written (sampled_*: the turn's version against the run's at
// its commit), and its leaves' whole paths when their group closed and
// its advantages were computed (consumed_*: the oldest turn of each
// leaf's path against the run's version at the close; the time the data
// waited counts). Means are over turns and over leaves; turns and paths
// that record no version are left out. All 0 for a run that never
// published a version.
type Staleness struct {
	SampledMean  float64 `json:"sampled_staleness_mean"`
	SampledMax   uint64  `json:"sampled_staleness_max"`
	ConsumedMean float64 `json:"consumed_staleness_mean"`
	ConsumedMax  uint64  `json:"consumed_staleness_max"`
}
