package api

import "github.com/patrdb/patrdb/store"

// StepMetrics are one step's outcome figures, the points of a run's
// learning curves (the viewer's charts, GET /api/v1/runs/{run}/steps).
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
	// Pools counts the rubrics of each pool as the step ended
	// (PoolTracker's rule: an event belongs to the highest step any event
	// so far carried).
	Pools map[store.RubricPool]int `json:"pools"`
}
