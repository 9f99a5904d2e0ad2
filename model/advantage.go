package model

// Advantage is the GRPO record of one leaf of a group.
type Advantage struct {
	_msgpack          struct{} `msgpack:",as_array"`
	Step              uint64   `json:"step"`
	Group             uint64   `json:"group"`
	Leaf              uint64   `json:"leaf"`
	Outcome           float64  `json:"outcome"`
	RubricScore       float64  `json:"rubric_score"` // centred within the group
	Lambda            float64  `json:"lambda"`
	Total             float64  `json:"total"` // Outcome + Lambda*RubricScore
	Mean              float64  `json:"mean"`
	Std               float64  `json:"std"`
	Advantage         float64  `json:"advantage"`
	Rubrics           []uint64 `json:"rubrics,omitempty"`
	ZeroVariance      bool     `json:"zero_variance"`       // of the outcome rewards, before shaping
	ZeroVarianceAfter bool     `json:"zero_variance_after"` // of the totals, after shaping
}

// Unlocked reports whether rubric shaping made the leaf's group
// informative: its outcome rewards had zero variance, its shaped totals
// do not.
func (a Advantage) Unlocked() bool { return a.ZeroVariance && !a.ZeroVarianceAfter }
