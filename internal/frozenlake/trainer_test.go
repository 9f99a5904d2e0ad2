package frozenlake

import (
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestTrainPaTRLearnsNonSlippery(t *testing.T) {
	db := storetest.Open(t)
	cfg := DefaultTrainConfig("patr")
	cfg.Steps = 12
	cfg.Batch = 8
	cfg.EvalEpisodes = 10
	rep := train(t, db, cfg)
	t.Logf("report: %+v", *rep)
	if rep.Steps != 12 || rep.Nodes == 0 || rep.Leaves == 0 {
		t.Fatalf("report = %+v", rep)
	}
	last := rep.History[len(rep.History)-1]
	if last.Success <= rep.History[0].Success {
		t.Errorf("leaf success did not improve: first %.3f last %.3f", rep.History[0].Success, last.Success)
	}
	err := db.ViewRun("demo", func(r *store.RunTx) error {
		f, err := r.Frontier()
		if len(f) != 0 {
			t.Errorf("frontier after training = %v, want empty", f)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
