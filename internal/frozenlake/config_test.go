package frozenlake

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/runconfig"
)

// TestTrainConfigIsARunConfig: what the demo records is read back by the
// run-config reader every other reader uses, rubric config and seed
// included; a run without rubric shaping records no rubric member.
func TestTrainConfigIsARunConfig(t *testing.T) {
	for _, rubrics := range []bool{false, true} {
		cfg := DefaultTrainConfig("patr")
		cfg.Seed = 7
		if rubrics {
			cfg.EnableRubrics()
		}
		raw, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, hasTree, err := runconfig.Of(model.Run{ID: "demo", Config: raw})
		if err != nil || !hasTree || !reflect.DeepEqual(got, cfg.Config) {
			t.Errorf("rubrics %t: read back %+v (tree %t, %v), want %+v", rubrics, got, hasTree, err, cfg.Config)
		}
		if rubrics && (got.Rubric == nil || got.Rubric.Seed != 7) {
			t.Errorf("rubric config %+v, want the run's seed 7", got.Rubric)
		}
		var back TrainConfig
		if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back, cfg) {
			t.Errorf("rubrics %t: round trip %+v, want %+v (%v)", rubrics, back, cfg, err)
		}
	}
}
