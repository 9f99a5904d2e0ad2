package model

// RubricPool is the pool a rubric is in.
type RubricPool string

const (
	PoolCandidate RubricPool = "candidate"
	PoolPublic    RubricPool = "public"
	PoolRetired   RubricPool = "retired"
	PoolMerged    RubricPool = "merged"
)

// Valid reports whether p is a known pool.
func (p RubricPool) Valid() bool {
	switch p {
	case PoolCandidate, PoolPublic, PoolRetired, PoolMerged:
		return true
	}
	return false
}

// CanMove: candidates are consolidated (merged), promoted or dropped
// (retired); public rubrics retire; retired and merged are final.
func (p RubricPool) CanMove(to RubricPool) bool {
	switch p {
	case PoolCandidate:
		return to == PoolMerged || to == PoolPublic || to == PoolRetired
	case PoolPublic:
		return to == PoolRetired
	}
	return false
}

// RubricOrigin says where a draft rubric was induced.
type RubricOrigin struct {
	_msgpack struct{} `msgpack:",as_array"`
	Step     uint64   `json:"step"`
	Group    uint64   `json:"group"`
	Anchors  []uint64 `json:"anchors,omitempty"` // tau+, tau-worst, tau-hard node ids
}

// RubricUsage holds the usage statistics of a public rubric. The running
// sums let its Pearson correlation with the outcome survive restarts exactly.
type RubricUsage struct {
	_msgpack       struct{} `msgpack:",as_array"`
	Activations    int      `json:"activations"`
	LastActivation int64    `json:"last_activation"` // step; -1 never
	PairsJudged    int      `json:"pairs_judged"`
	LastVariance   float64  `json:"last_variance"`
	LowVarStreak   int      `json:"low_var_streak"`
	GroupsUnlocked int      `json:"groups_unlocked"`
	N              float64  `json:"n"`
	SumX           float64  `json:"sum_x"`
	SumY           float64  `json:"sum_y"`
	SumXY          float64  `json:"sum_xy"`
	SumXX          float64  `json:"sum_xx"`
	SumYY          float64  `json:"sum_yy"`
}

// Rubric is one entry of the ARBOR rubric buffer.
type Rubric struct {
	_msgpack     struct{}     `msgpack:",as_array"`
	ID           uint64       `json:"id"`
	Pool         RubricPool   `json:"pool"`
	Text         string       `json:"text"`
	Feature      string       `json:"feature,omitempty"` // optional machine key of what the rubric judges
	Origin       RubricOrigin `json:"origin"`
	Parents      []uint64     `json:"parents,omitempty"`     // drafts a public rubric consolidates
	MergedInto   uint64       `json:"merged_into,omitempty"` // for a merged draft: the public rubric that absorbed it
	Support      int          `json:"support"`
	Variance     float64      `json:"variance"` // admission figures
	Rho          float64      `json:"rho"`
	Usage        RubricUsage  `json:"usage"`
	CreatedStep  uint64       `json:"created_step"`
	RetireStep   uint64       `json:"retire_step,omitempty"`
	RetireReason string       `json:"retire_reason,omitempty"`
}

// Draft is one rubric an inducer proposes. Feature is an optional machine
// key for what it judges (stored with the rubric), which lets deterministic
// judges and consolidators work without parsing the text.
type Draft struct {
	Text    string `msgpack:"text" json:"text"`
	Feature string `msgpack:"feature,omitempty" json:"feature,omitempty"`
}

// Consolidated is one general rubric a consolidator writes, naming the
// candidate drafts (by id) it abstracts.
type Consolidated struct {
	Text    string   `msgpack:"text" json:"text"`
	Feature string   `msgpack:"feature,omitempty" json:"feature,omitempty"`
	Absorbs []uint64 `msgpack:"absorbs" json:"absorbs"`
}

// PoolDecision is what the rubric buffer decided for one group, as
// rubricpool's Prepare computes it (its GroupResult embeds one) and the
// shape endpoint serves it.
type PoolDecision struct {
	// Lambda is the rubric lambda when rubrics scored the group, else 0.
	Lambda float64 `json:"lambda"`
	// Rubrics are the ids of the rubrics that scored the group, in id
	// order (nil when none did).
	Rubrics []uint64 `json:"rubrics,omitempty"`
	// ZeroVariance and ZeroVarianceAfter: whether the base rewards, and the
	// shaped ones, are all equal. Unlocked is the first without the second.
	ZeroVariance      bool `json:"zero_variance"`
	ZeroVarianceAfter bool `json:"zero_variance_after"`
	Unlocked          bool `json:"unlocked"`

	// What the pool decided, for logs and progress displays.
	Drafts       int      `json:"drafts"`              // drafts the inducer wrote (0 when not induced)
	Admitted     []uint64 `json:"admitted,omitempty"`  // new candidates
	Rejected     int      `json:"rejected"`            // drafts that failed admission
	Supported    []uint64 `json:"supported,omitempty"` // rubrics a near-duplicate draft added support to
	Consolidated bool     `json:"consolidated"`
	NewPublic    []uint64 `json:"new_public,omitempty"` // public rubrics created by consolidation
	Merged       []uint64 `json:"merged,omitempty"`     // drafts merged into public rubrics
	Retired      []uint64 `json:"retired,omitempty"`    // public rubrics retired, then candidates dropped
}
