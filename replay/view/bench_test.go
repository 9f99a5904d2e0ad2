package view_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
)

// BenchmarkViewer times each viewer figure next to its anchor, the store
// read it is built on, so the ratio is what the figure adds to the read:
// ViewGroup over GroupNodes, ViewTrajectory over Trajectory, a rubric page
// over reading every rubric.
func BenchmarkViewer(b *testing.B) {
	db, run, _ := replaytest.BenchRun(b)
	var g model.Group
	var leaf uint64
	if err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run(run)
		gs, err := r.Groups(0)
		if err != nil {
			return err
		}
		g = gs[len(gs)-1]
		nodes, err := r.GroupNodes(g)
		for _, n := range nodes {
			if n.Status.Leaf() && n.PathLen() > 0 {
				leaf = n.ID
			}
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	bench := func(name string, fn func(r *store.RunTx) error) {
		b.Run(name, func(b *testing.B) {
			err := db.View(func(tx *store.Tx) error {
				r, _ := tx.Run(run)
				for b.Loop() {
					if err := fn(r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
	bench("GroupNodes", func(r *store.RunTx) error { _, err := r.GroupNodes(g); return err })
	bench("ViewGroup", func(r *store.RunTx) error { _, err := view.ViewGroup(r, g.ID); return err })
	bench("Trajectory", func(r *store.RunTx) error { _, err := r.Trajectory(leaf); return err })
	bench("ViewTrajectory", func(r *store.RunTx) error { _, err := view.ViewTrajectory(r, leaf); return err })
	bench("Rubrics", func(r *store.RunTx) error { _, err := r.Rubrics(""); return err })
	bench("RubricPage", func(r *store.RunTx) error {
		_, err := view.Rubrics(r, view.RubricQuery{Text: "draft", Sort: "rho"})
		return err
	})
	bench("EnvSteps", func(r *store.RunTx) error { _, err := view.EnvSteps(r); return err })
}
