package model

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
	Pools map[RubricPool]int `json:"pools"`
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

// SummaryOptions says what a summary includes beyond the run's totals.
type SummaryOptions struct {
	Steps   bool // a row per step
	Buckets bool // bytes per bucket: walks every page of the run
}
