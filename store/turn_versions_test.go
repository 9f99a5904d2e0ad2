package store_test

// The policy versions a node's turns were generated with: MinVersion and
// MaxVersion span every version a writer gave, across appends, so a
// trainer can tell which turns came from a stale policy.

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestTurnVersionsSpanEveryAppend(t *testing.T) {
	db := storetest.Open(t)
	turn := func(version uint64) model.Turn {
		tn := textTurn("v")
		tn.PolicyVersion = version
		return tn
	}
	var id uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		id = n.ID
		if err != nil {
			return err
		}
		// 0 means the writer did not say, and leaves the span alone.
		for i, v := range []uint64{0, 1, 5, 0, 3} {
			if err := r.AppendTurns(id, i, turn(v)); err != nil {
				return err
			}
		}
		// Several turns in one call span all of theirs, the greatest
		// not first; a later, older version leaves the greatest.
		if err := r.AppendTurns(id, 5, turn(4), turn(0), turn(9), turn(6)); err != nil {
			return err
		}
		return r.AppendTurns(id, 9, turn(2))
	})
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		n, err := r.Node(id)
		if err != nil {
			return err
		}
		if n.MinVersion != 1 || n.MaxVersion != 9 || n.Turns != 10 {
			t.Errorf("after versions 0, 1, 5, 0, 3, then 4, 0, 9, 6 in one call, then 2: MinVersion %d, MaxVersion %d, %d turns; want 1, 9, 10",
				n.MinVersion, n.MaxVersion, n.Turns)
		}
		return nil
	})
}

// A node with no turns reads as an empty list without touching the turns
// bucket: a run whose turns bucket is gone still lists its turnless nodes
// (Check reports the missing bucket), while a node with turns reads as
// corrupt.
func TestTurnlessNodeReadsWithoutTurnsBucket(t *testing.T) {
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
		if ts, err := r.Turns(f.F); err != nil || len(ts) != 0 {
			t.Errorf("Turns of a node with no turns: %v, %v; want none, no error", ts, err)
		}
		if _, err := r.Turns(f.X); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Turns of a node with a turn: %v, want ErrCorrupt", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}
