package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestSmokeTreeAndTrajectory(t *testing.T) {
	db := storetest.Open(t)
	var leaf uint64
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("r1", []byte(`{}`), nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t"})
		if err != nil {
			return err
		}
		root, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		mk := func(s string) store.Turn {
			return store.Turn{Action: s, ActionTokens: []uint32{1, 2}, ActionLogprobs: []float32{-0.5, -1}, Observation: "o" + s}
		}
		if err := r.AppendTurns(root.ID, 0, mk("a"), mk("b"), mk("c")); err != nil {
			return err
		}
		if err := r.Route(root.ID, store.Decision{Action: store.ActionExpand, Children: 2}); err != nil {
			return err
		}
		c1, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: root.ID, Fork: 2})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(c1.ID, 0, mk("d"), mk("e")); err != nil {
			return err
		}
		if err := r.Route(c1.ID, store.Decision{Action: store.ActionExpand, Children: 2}); err != nil {
			return err
		}
		c2, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: c1.ID, Fork: 1})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(c2.ID, 0, mk("f")); err != nil {
			return err
		}
		leaf = c2.ID
		return r.SetNodeStatus(c2.ID, store.NodeCompleted)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r1")
		if err != nil {
			return err
		}
		path, err := r.Trajectory(leaf)
		if err != nil {
			return err
		}
		got := ""
		for _, p := range path {
			got += p.Action
		}
		if got != "abdf" {
			t.Errorf("trajectory = %q, want abdf", got)
		}
		if path[0].ActionLogprobs[1] != -1 {
			t.Errorf("logprob round trip: %v", path[0].ActionLogprobs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
