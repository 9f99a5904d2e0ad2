package view_test

import (
	"slices"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A trajectory's path names each node on it, root first (not the leaf
// repeated), each with the routing decisions of its scores on the path
// (the root's expansion at the fork); a turn with a single logprob has it
// as its mean and its minimum; a turn of as many logprobs as strip bins
// has one logprob a bin.
func TestViewTrajectoryPathAndOneLogprob(t *testing.T) {
	db := storetest.Open(t)
	var root, child model.Node
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("v", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1})
		if err != nil {
			return err
		}
		if root, err = r.AddNode(store.NodeSpec{Step: 1, Group: g.ID}); err != nil {
			return err
		}
		one := model.Turn{Action: "a", ActionTokens: []uint32{7}, ActionLogprobs: []float32{-0.5}, Observation: "o"}
		if err := r.AppendTurns(root.ID, 0, one); err != nil {
			return err
		}
		if err := r.Score(root.ID, model.Score{Interval: 0, Turn: 1, Value: 0.5}); err != nil {
			return err
		}
		if err := r.Route(root.ID, model.Decision{Interval: 0, Action: model.ActionExpand, Score: 0.5, Children: 1}); err != nil {
			return err
		}
		if child, err = r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: root.ID, Fork: 1}); err != nil {
			return err
		}
		return r.AppendTurns(child.ID, 0, model.Turn{Action: "b", Observation: "p"},
			model.Turn{Action: "c", ActionTokens: []uint32{1, 2, 3, 4}, ActionLogprobs: []float32{-1, -3, -2, -4}, Observation: "q"})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("v")
		if err != nil {
			return err
		}
		v, err := view.ViewTrajectory(r, child.ID)
		if err != nil {
			return err
		}
		if len(v.Path) != 2 || v.Path[0].ID != root.ID || v.Path[1].ID != child.ID || v.Path[0].Count != 1 || v.Path[1].Count != 2 {
			t.Fatalf("path %+v, want root %d (one turn) then child %d (two)", v.Path, root.ID, child.ID)
		}
		if d := v.Path[0].Decisions; len(d) != 1 || d[0].Action != model.ActionExpand || d[0].Children != 1 || len(v.Path[1].Decisions) != 0 {
			t.Errorf("decisions on the path: root %+v, child %+v; want the root's expansion only", d, v.Path[1].Decisions)
		}
		if len(v.Turns) != 3 {
			t.Fatalf("%d turns, want 3", len(v.Turns))
		}
		if strip := v.Turns[2].LogprobStrip; !slices.Equal(strip, []float64{-1, -3, -2, -4}) {
			t.Errorf("logprobs -1 -3 -2 -4: strip %v, want each in its bin", strip)
		}
		first := v.Turns[0]
		if first.MeanLogprob == nil || *first.MeanLogprob != -0.5 || first.MinLogprob == nil || *first.MinLogprob != -0.5 {
			t.Errorf("one logprob of -0.5: mean %v, min %v", first.MeanLogprob, first.MinLogprob)
		}
		if v.Turns[1].MeanLogprob != nil {
			t.Errorf("no logprobs: mean %v, want null", *v.Turns[1].MeanLogprob)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
