package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A write transaction puts its turns and events late, in one pass per
// bucket; every read in the same transaction must still see every write
// made before it, and the commit must hold them all.
func TestQueuedWritesAreReadInTheirTransaction(t *testing.T) {
	db := storetest.Open(t)
	var node uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		node = n.ID
		if err := r.AppendTurns(n.ID, 0, textTurn("one"), textTurn("two")); err != nil {
			return err
		}
		got, err := r.Turns(n.ID)
		if err != nil || len(got) != 2 || got[1].Action != "act two" {
			t.Errorf("turns read back in the writing transaction: %d, %v", len(got), err)
		}
		before := r.LastSeq()
		if err := r.Score(n.ID, model.Score{Interval: 0, Turn: 2, Value: 0.5}); err != nil {
			return err
		}
		var kinds []model.EventKind
		if err := r.Events(before, func(e model.Event) error {
			kinds = append(kinds, e.Kind)
			return nil
		}); err != nil {
			return err
		}
		if len(kinds) != 2 || kinds[0] != model.EvTurns || kinds[1] != model.EvNodeScore {
			t.Errorf("events from %d read in the writing transaction: %v; want node.turns, node.score", before, kinds)
		}
		// Appends after a read are queued again and read again.
		if err := r.AppendTurns(n.ID, 2, textTurn("three")); err != nil {
			return err
		}
		traj, err := r.Trajectory(n.ID)
		if err != nil || len(traj) != 3 {
			t.Errorf("trajectory in the writing transaction: %d turns, %v; want 3", len(traj), err)
		}
		return nil
	})
	view(t, db, func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		got, err := r.Turns(node)
		if err != nil || len(got) != 3 || got[2].Action != "act three" {
			t.Errorf("committed turns: %d, %v; want 3", len(got), err)
		}
		return nil
	})
	storetest.MustCheckClose(t, db)
}
