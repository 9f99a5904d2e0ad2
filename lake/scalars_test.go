package lake_test

import (
	"context"
	"github.com/patrdb/patrdb/model"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The trainer's figures join the lake as their own table, each write's
// figures in the log's partition, and come back whole from a restore.
func TestScalarsJoinTheLakeAndComeBack(t *testing.T) {
	db := storetest.Open(t)
	if err := train(context.Background(), t, db, trainConfig("demo", 3, 2), false); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]map[string]float64{}
	err := db.UpdateRun("demo", func(r *store.RunTx) error {
		for s := uint64(1); s <= 3; s++ {
			v := map[string]float64{"loss": 1 / float64(s), "kl": float64(s) / 100}
			if err := r.PutScalars(s, v); err != nil {
				return err
			}
			want[s] = v
		}
		// A figure logged again after its step was checkpointed.
		if err := r.PutScalars(2, map[string]float64{"loss": 0.4}); err != nil {
			return err
		}
		want[2]["loss"] = 0.4
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "lake")
	lk := openLake(t, dir)
	res, err := lk.Export(context.Background(), db, "demo", lake.ExportOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows["scalars"] != 8 {
		t.Errorf("export: %d scalar rows, want 8 (the two figures of each of the four writes)", res.Rows["scalars"])
	}
	got := map[uint64]map[string]float64{}
	seq := map[[2]any]int64{}
	for _, row := range readTable[lake.ScalarRow](t, dir, "scalars", "demo") {
		k := [2]any{row.ScalarStep, row.Name}
		if row.Seq < seq[k] {
			continue
		}
		seq[k] = row.Seq
		if got[uint64(row.ScalarStep)] == nil {
			got[uint64(row.ScalarStep)] = map[string]float64{}
		}
		got[uint64(row.ScalarStep)][row.Name] = row.Value
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the lake's figures as they stand %v, the store's %v", got, want)
	}

	back := storetest.Open(t)
	if _, err := lk.Restore(context.Background(), back, "demo", lake.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	restored := map[uint64]map[string]float64{}
	err = back.ViewRun("demo", func(r *store.RunTx) error {
		return r.ForEachScalars(0, func(s model.Scalars) error { restored[s.Step] = s.Values; return nil })
	})
	if err != nil || !reflect.DeepEqual(restored, want) {
		t.Fatalf("restored %v %v, want %v", restored, err, want)
	}
}

// A trainer may number its figures its own way (a global optimizer step,
// samples seen): a figure logged for step 1000 of a running run at step 1
// does not hold the log back. The steps checkpointed after it still reach
// the lake's log, with their checkpoint events, at the next export.
func TestAFarFutureFigureDoesNotHoldTheLogBack(t *testing.T) {
	db := storetest.Open(t)
	running := func() {
		t.Helper()
		if err := db.UpdateRun("demo", func(r *store.RunTx) error { return r.SetRunStatus(model.RunRunning) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := train(context.Background(), t, db, trainConfig("demo", 1, 2), false); err != nil {
		t.Fatal(err)
	}
	running()
	if err := db.UpdateRun("demo", func(r *store.RunTx) error {
		return r.PutScalars(1000, map[string]float64{"loss": 0.5})
	}); err != nil {
		t.Fatal(err)
	}
	if err := train(context.Background(), t, db, trainConfig("demo", 2, 2), true); err != nil {
		t.Fatal(err)
	}
	running()
	dir := filepath.Join(t.TempDir(), "lake")
	res, err := openLake(t, dir).Export(context.Background(), db, "demo", lake.ExportOptions{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Through != 2 {
		t.Errorf("the export went through step %d, want 2", res.Through)
	}
	ckpts := map[int64]bool{}
	for _, row := range readTable[lake.EventRow](t, dir, "events", "demo") {
		if row.Kind == string(model.EvCheckpoint) {
			ckpts[row.EventStep] = true
		}
	}
	if !ckpts[1] || !ckpts[2] {
		t.Errorf("the lake's log holds the checkpoints of steps %v, want 1 and 2", ckpts)
	}
	if res.Rows["scalars"] != 1 {
		t.Errorf("%d scalar rows, want the one figure", res.Rows["scalars"])
	}
}
