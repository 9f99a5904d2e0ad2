package replay_test

import (
	"testing"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The run's totals add up every step's figures, the frontier (active
// branches) included.
func TestStatsTotalCountsActive(t *testing.T) {
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("a", nil, nil)
		if err != nil {
			return err
		}
		for step, roots := range map[uint64]int{1: 2, 2: 3} {
			g, err := r.OpenGroup(store.GroupSpec{Step: step})
			if err != nil {
				return err
			}
			for i := range roots {
				if _, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("a")
		if err != nil {
			return err
		}
		s, err := replay.Stats(r)
		if err != nil {
			return err
		}
		if len(s.Steps) != 2 || s.Steps[0].Active != 2 || s.Steps[1].Active != 3 {
			t.Fatalf("steps %+v, want 2 and 3 active", s.Steps)
		}
		if s.Total.Active != 5 || s.Total.Nodes != 5 || s.Total.Groups != 2 {
			t.Errorf("total %+v, want 5 active of 5 nodes in 2 groups", s.Total)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
