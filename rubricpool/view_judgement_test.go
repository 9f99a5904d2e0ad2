package rubricpool

import (
	"math"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// A rubric's view carries its running correlation once its usage defines
// one (the value Rho gives), and null before.
func TestViewRubricRunningCorr(t *testing.T) {
	if v := ViewRubric(model.Rubric{ID: 1}); v.RunningCorr != nil {
		t.Errorf("no usage: running corr %v, want null", *v.RunningCorr)
	}
	var c Corr
	for _, p := range [][2]float64{{0, 0}, {1, 1}, {1, 0.5}, {0, 0.25}} {
		c.Add(p[0], p[1])
	}
	rb := model.Rubric{ID: 2}
	setCorr(&rb.Usage, c)
	want, ok := Rho(rb.Usage)
	if !ok {
		t.Fatal("the usage defines no correlation")
	}
	v := ViewRubric(rb)
	if v.RunningCorr == nil || math.Abs(*v.RunningCorr-want) > 1e-12 || v.ID != 2 {
		t.Errorf("view %+v, want running corr %v", v, want)
	}
}

// A judgement names two distinct trajectories of the group: either index
// out of range on either side is refused, whatever the other one is.
func TestJudgementCheckBounds(t *testing.T) {
	for _, j := range []Judgement{{A: 4, B: 0}, {A: 0, B: 4}, {A: -1, B: 0}, {A: 0, B: -1}, {A: 2, B: 2}} {
		j.Result = AWins
		if err := j.Check(4); err == nil {
			t.Errorf("judgement (%d, %d) in a group of 4 accepted", j.A, j.B)
		}
	}
	if err := (Judgement{A: 3, B: 0, Result: Tie}).Check(4); err != nil {
		t.Errorf("judgement (3, 0) in a group of 4: %v", err)
	}
}
