package store_test

// The turn API's refusals: writes outside a write transaction, reads of
// nodes or turns that do not exist, and empty appends that write nothing.

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestTurnRefusals(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	enc, err := store.EncodeTurns(textTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		if err := r.AppendEncodedTurns(f.X, 1, enc); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("AppendEncodedTurns in a read transaction: %v, want ErrReadOnly", err)
		}
		if err := r.AppendTurns(f.X, 1, textTurn("x")); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("AppendTurns in a read transaction: %v, want ErrReadOnly", err)
		}
		if _, err := r.Turns(31337); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Turns of an unknown node: %v, want ErrNotFound", err)
		}
		for _, idx := range []int{-1, 1} {
			if _, err := r.Turn(f.X, idx); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Turn(%d) of a node with 1 turn: %v, want ErrNotFound", idx, err)
			}
		}
		if tn, err := r.Turn(f.X, 0); err != nil || tn.Action != "act x0" {
			t.Errorf("Turn(0): %+v, %v", tn, err)
		}
		return nil
	})
	last := dumpRun(t, db, "r1").LastSeq
	inRun(t, db, true, "r1", func(r *store.RunTx) error {
		if err := r.AppendTurns(f.X, 1); err != nil {
			return err
		}
		return r.AppendEncodedTurns(f.X, 1, store.EncodedTurns{})
	})
	if d := dumpRun(t, db, "r1"); d.LastSeq != last || len(d.Turns[f.X]) != 1 {
		t.Errorf("empty appends wrote events (%d → %d) or turns (%d)", last, d.LastSeq, len(d.Turns[f.X]))
	}
}

// TestTurnsWithoutTurnsBucket: a run whose turns bucket is gone reads as
// corrupt, for one turn and for all of a node's, and refuses appends.
func TestTurnsWithoutTurnsBucket(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	err := db.Update(func(tx *store.Tx) error {
		if err := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r1")).DeleteBucket([]byte("turns")); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Turn(f.X, 0); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Turn without a turns bucket: %v, want ErrCorrupt", err)
		}
		if _, err := r.Turns(f.X); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Turns without a turns bucket: %v, want ErrCorrupt", err)
		}
		if err := r.AppendTurns(f.X, 1, textTurn("x1")); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("AppendTurns without a turns bucket: %v, want ErrCorrupt", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}
