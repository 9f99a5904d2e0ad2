package server

import (
	"github.com/patrdb/patrdb/model"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// TestStepPoolsByEventStep: a step's pool counts end with the last event
// stamped with that step. A rubric a trainer proposes for step 2 before
// step 2's first group opens belongs to step 2, not to step 1 (a rule that
// switched steps on group.open events would count it in step 1).
func TestStepPoolsByEventStep(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	put := func(rb model.Rubric) {
		t.Helper()
		err := e.db.Update(func(tx *store.Tx) error {
			rt, err := tx.Run("r1")
			if err != nil {
				return err
			}
			_, err = rt.PutRubric(rb)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	openStep(e, "r1", 1)
	put(model.Rubric{Pool: model.PoolPublic, Text: "checks the map", CreatedStep: 1, Usage: model.RubricUsage{LastActivation: -1}})
	put(model.Rubric{Pool: model.PoolCandidate, Text: "proposed for step 2", CreatedStep: 2})
	openStep(e, "r1", 2)

	var steps struct{ Steps []model.StepMetrics }
	e.get("/api/v1/runs/r1/steps", &steps)
	if len(steps.Steps) != 2 {
		t.Fatalf("steps: %+v", steps)
	}
	s1, s2 := steps.Steps[0].Pools, steps.Steps[1].Pools
	if s1[model.PoolPublic] != 1 || s1[model.PoolCandidate] != 0 {
		t.Errorf("step 1 pools %v, want 1 public and no candidate (the candidate is step 2's)", s1)
	}
	if s2[model.PoolPublic] != 1 || s2[model.PoolCandidate] != 1 {
		t.Errorf("step 2 pools %v, want 1 public and 1 candidate", s2)
	}
}
