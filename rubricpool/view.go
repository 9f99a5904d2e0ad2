package rubricpool

import "github.com/patrdb/patrdb/model"

// RubricView is a rubric as the store holds it (its rho is the admission
// correlation) with its running correlation with the outcome over its
// activations, from the sums in its usage: what a reader of the pool is
// shown.
type RubricView struct {
	model.Rubric
	RunningCorr *float64 `json:"running_corr"` // null while undefined
}

// ViewRubric is rb with its running correlation.
func ViewRubric(rb model.Rubric) RubricView {
	v := RubricView{Rubric: rb}
	if c, ok := Rho(rb.Usage); ok {
		v.RunningCorr = &c
	}
	return v
}
