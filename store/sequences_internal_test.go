package store

import (
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// BenchmarkWriterSequenceCheck is what a write transaction's check of a
// run's id sequences costs (sequences.go): checkSequences over a run of
// 4,000 nodes, against its anchor, an Update that appends one event to
// the run (NoSync, so the anchor is the store's own work, not an fsync).
func BenchmarkWriterSequenceCheck(b *testing.B) {
	o := DefaultOptions()
	o.NoSync = true
	db, err := Open(filepath.Join(b.TempDir(), "seq.db"), o)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		for range 200 {
			g, err := r.OpenGroup(GroupSpec{Step: 1})
			if err != nil {
				return err
			}
			for i := range 20 {
				n, err := r.AddNode(NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
				if err != nil {
					return err
				}
				if err := r.AppendTurns(n.ID, 0, model.Turn{Action: "a", Observation: "o"}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("update-one-event", func(b *testing.B) {
		for b.Loop() {
			err := db.Update(func(tx *Tx) error {
				r, err := tx.Run("r")
				if err == nil {
					_, err = r.AppendEvent("bench", 0, 0, 0, 0, nil)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("check-sequences", func(b *testing.B) {
		err := db.View(func(tx *Tx) error {
			r, err := tx.handle("r")
			for b.Loop() {
				if err == nil {
					err = r.checkSequences()
				}
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}
