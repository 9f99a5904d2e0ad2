package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// ViewRun and UpdateRun are View and Update bound to one run: a run the
// file does not hold is ErrNotFound before fn runs, UpdateRun commits
// what fn wrote when it returns nil and nothing when it fails, and
// ViewRun cannot write.
func TestViewRunAndUpdateRun(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error { _, err := tx.CreateRun("r", nil, nil); return err })
	ran := false
	for name, do := range map[string]func(string, func(*store.RunTx) error) error{"ViewRun": db.ViewRun, "UpdateRun": db.UpdateRun} {
		if err := do("nope", func(*store.RunTx) error { ran = true; return nil }); !errors.Is(err, model.ErrNotFound) || ran {
			t.Errorf("%s of a missing run: %v (fn ran: %t), want ErrNotFound", name, err, ran)
		}
	}
	failed := errors.New("fn failed")
	if err := db.UpdateRun("r", func(r *store.RunTx) error {
		if err := r.SetRunStatus(model.RunFailed); err != nil {
			return err
		}
		return failed
	}); err != failed {
		t.Fatalf("UpdateRun whose fn fails: %v", err)
	}
	status := func() model.RunStatus {
		var st model.RunStatus
		if err := db.ViewRun("r", func(r *store.RunTx) error {
			info, err := r.Info()
			st = info.Status
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st != model.RunRunning {
		t.Fatalf("after a failed UpdateRun the run is %q, want it unchanged (running)", st)
	}
	if err := db.UpdateRun("r", func(r *store.RunTx) error { return r.SetRunStatus(model.RunFinished) }); err != nil {
		t.Fatal(err)
	}
	if st := status(); st != model.RunFinished {
		t.Fatalf("after UpdateRun the run is %q, want finished", st)
	}
	if err := db.ViewRun("r", func(r *store.RunTx) error { return r.SetRunStatus(model.RunFailed) }); err == nil {
		t.Fatal("ViewRun wrote")
	}
}
