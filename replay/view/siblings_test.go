package view_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Branches that part after fewer shared turns than SharedContext show all
// of them as the shared context, and each its own turns from the fork,
// its path of node ids from the root and the scores along it, each with
// the routing decision taken on it: the parent's expansion at the fork,
// then the branch's own survive or prune.
func TestViewBranchesOfAnEarlyFork(t *testing.T) {
	db := storetest.Open(t)
	var kids []uint64
	var rootID uint64
	routes := []model.Action{model.ActionPrune, model.ActionSurvive}
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("f", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "p"})
		if err != nil {
			return err
		}
		root, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		rootID = root.ID
		if err := r.AppendTurns(root.ID, 0, model.Turn{Action: "shared", Observation: "o"}); err != nil {
			return err
		}
		if err := r.Score(root.ID, model.Score{Interval: 0, Turn: 1, Value: 0.5}); err != nil {
			return err
		}
		if err := r.Route(root.ID, model.Decision{Interval: 0, Action: model.ActionExpand, Score: 0.5, Children: 2}); err != nil {
			return err
		}
		for i, action := range []string{"left", "right"} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: root.ID, Fork: 1, Ordinal: i})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(n.ID, 0, model.Turn{Action: action, Observation: "o"}); err != nil {
				return err
			}
			if err := r.Score(n.ID, model.Score{Interval: 1, Turn: 2, Value: float64(i)}); err != nil {
				return err
			}
			if err := r.Route(n.ID, model.Decision{Interval: 1, Action: routes[i], Score: float64(i)}); err != nil {
				return err
			}
			kids = append(kids, n.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("f")
		if err != nil {
			return err
		}
		v, err := view.ViewBranches(r, kids)
		if err != nil {
			return err
		}
		if v.Fork != 1 || len(v.Shared) != 1 || v.Shared[0].Action != "shared" || len(v.Branches) != 2 ||
			len(v.Branches[0].Turns) != 1 || v.Branches[0].Turns[0].Action != "left" || v.Branches[1].Turns[0].Action != "right" {
			t.Errorf("the branches of a fork after one turn: %+v", v)
		}
		for i, b := range v.Branches {
			if len(b.Path) != 2 || b.Path[0] != rootID || b.Path[1] != kids[i] {
				t.Errorf("branch %d: path %v, want [%d %d]", i, b.Path, rootID, kids[i])
			}
			if len(b.Intervals) != 2 {
				t.Errorf("branch %d: intervals %+v, want the root's and its own", i, b.Intervals)
				continue
			}
			at, own := b.Intervals[0], b.Intervals[1]
			if at.Node != rootID || at.Turn != 1 || at.Decision == nil || at.Decision.Action != model.ActionExpand || at.Decision.Children != 2 {
				t.Errorf("branch %d: the fork's interval %+v (decision %+v), want the root's expansion", i, at, at.Decision)
			}
			if own.Node != kids[i] || own.Interval != 1 || own.Score != float64(i) || own.Decision == nil || own.Decision.Action != routes[i] {
				t.Errorf("branch %d: its own interval %+v (decision %+v), want %s", i, own, own.Decision, routes[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Branches that part after more shared turns than SharedContext show the
// last SharedContext of them; a node set beside its own descendant parts
// from it where the node's path ends, its own branch empty past the fork;
// a node the run does not have is ErrNotFound.
func TestViewBranchesOfALateForkAndOfAnAncestor(t *testing.T) {
	db := storetest.Open(t)
	var root model.Node
	var kids []uint64
	err := db.Update(func(tx *store.Tx) error {
		r, _, n, err := replaytest.OneNode(tx, "late")
		if err != nil {
			return err
		}
		root = n
		for i, a := range []string{"s0", "s1", "s2"} {
			if err := r.AppendTurns(root.ID, i, model.Turn{Action: a, Observation: "o"}); err != nil {
				return err
			}
		}
		for i, a := range []string{"left", "right"} {
			k, err := r.AddNode(store.NodeSpec{Step: 1, Group: root.Group, Parent: root.ID, Fork: 3, Ordinal: i})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(k.ID, 0, model.Turn{Action: a, Observation: "o"}); err != nil {
				return err
			}
			kids = append(kids, k.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("late")
		if err != nil {
			return err
		}
		v, err := view.ViewBranches(r, kids)
		if err != nil {
			return err
		}
		if v.Fork != 3 || v.ForkNode != root.ID || len(v.Shared) != view.SharedContext || v.Shared[0].Action != "s1" || v.Shared[1].Action != "s2" {
			t.Errorf("siblings parting after 3 shared turns: fork %d at node %d, shared %+v; want 3 at %d, s1 and s2", v.Fork, v.ForkNode, v.Shared, root.ID)
		}
		if _, err := view.ViewBranches(r, []uint64{kids[0], 1 << 40}); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("a node the run does not have beside a branch: %v, want ErrNotFound", err)
		}
		v, err = view.ViewBranches(r, []uint64{root.ID, kids[0]})
		if err != nil {
			return err
		}
		if v.Fork != 3 || len(v.Branches) != 2 || len(v.Branches[0].Turns) != 0 || len(v.Branches[1].Turns) != 1 || v.Branches[1].Turns[0].Action != "left" {
			t.Errorf("a node beside its child: %+v, want the fork at 3, the node with no turns past it, the child with its one", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
