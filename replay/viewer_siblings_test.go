package replay_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Branches that part after fewer shared turns than SharedContext show all
// of them as the shared context, and each its own turns from the fork.
func TestViewBranchesOfAnEarlyFork(t *testing.T) {
	db := storetest.Open(t)
	var kids []uint64
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
		if err := r.AppendTurns(root.ID, 0, model.Turn{Action: "shared", Observation: "o"}); err != nil {
			return err
		}
		if err := r.SetNodeStatus(root.ID, model.NodeExpanded); err != nil {
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
		v, err := replay.ViewBranches(r, kids)
		if err != nil {
			return err
		}
		if v.Fork != 1 || len(v.Shared) != 1 || v.Shared[0].Action != "shared" || len(v.Branches) != 2 ||
			len(v.Branches[0].Turns) != 1 || v.Branches[0].Turns[0].Action != "left" || v.Branches[1].Turns[0].Action != "right" {
			t.Errorf("the branches of a fork after one turn: %+v", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
