package client_test

import (
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/api"
)

// A trainer's scalars are merged into the step's record, and read back
// from a step on.
func TestScalars(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	for _, step := range []uint64{11, 12} {
		if _, err := s.c.LogScalars(bg, "r", api.ScalarsRequest{Step: step, Values: map[string]float64{"loss": float64(step)}}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.c.LogScalars(bg, "r", api.ScalarsRequest{Step: 12, Values: map[string]float64{"kl": 0.5}})
	if err != nil || got.Step != 12 || !reflect.DeepEqual(got.Values, map[string]float64{"loss": 12, "kl": 0.5}) {
		t.Fatalf("the merged record: %+v, %v", got, err)
	}
	for from, want := range map[uint64][]uint64{0: {11, 12}, 12: {12}, 13: nil} {
		page, err := s.c.Scalars(bg, "r", from)
		if err != nil {
			t.Fatal(err)
		}
		var steps []uint64
		for _, sc := range page.Steps {
			steps = append(steps, sc.Step)
		}
		if !reflect.DeepEqual(steps, want) {
			t.Errorf("scalars from %d: steps %v, want %v", from, steps, want)
		}
	}
}
