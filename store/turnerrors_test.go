package store_test

// The turn API's refusals: writes outside a write transaction, reads of
// nodes or turns that do not exist, and empty appends that write nothing.

import (
	"errors"
	"github.com/patrdb/patrdb/model"
	"strings"
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
		if _, err := r.Turns(31337); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Turns of an unknown node: %v, want ErrNotFound", err)
		}
		if _, err := r.Turn(31337, 0); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Turn of an unknown node: %v, want ErrNotFound", err)
		}
		for _, idx := range []int{-1, 1} {
			if _, err := r.Turn(f.X, idx); !errors.Is(err, model.ErrNotFound) {
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

// A refused append names the turn by its index in the node, from where the
// call began, not by its place in the call.
func TestAppendTurnsNamesTheRefusedTurn(t *testing.T) {
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		if err := r.AppendTurns(n.ID, 0, textTurn("a"), textTurn("b")); err != nil {
			return err
		}
		bad := textTurn("d")
		bad.Observation = "\xff"
		return r.AppendTurns(n.ID, 2, textTurn("c"), bad)
	})
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "turn 3 of node") {
		t.Fatalf("append of a bad turn at index 3: %v, want ErrInvalid naming turn 3", err)
	}
}
