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
