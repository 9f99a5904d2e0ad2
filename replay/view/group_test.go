package view_test

import (
	"slices"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The group view lists siblings by ordinal — their place among the
// siblings — whatever order their ids were given in.
func TestViewGroupListsSiblingsByOrdinal(t *testing.T) {
	db := storetest.Open(t)
	var gid uint64
	byOrdinal := make([]uint64, 3) // the roots
	kids := make([]uint64, 3)      // the first root's children
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("o", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "p"})
		if err != nil {
			return err
		}
		gid = g.ID
		for _, ord := range []int{2, 0, 1} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: ord})
			if err != nil {
				return err
			}
			byOrdinal[ord] = n.ID
		}
		for _, ord := range []int{1, 2, 0} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: gid, Parent: byOrdinal[0], Ordinal: ord})
			if err != nil {
				return err
			}
			kids[ord] = n.ID
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("o")
		if err != nil {
			return err
		}
		v, err := view.ViewGroup(r, gid)
		if err != nil {
			return err
		}
		var got []uint64
		for _, n := range v.Nodes {
			got = append(got, n.ID)
		}
		// Depth first: each root, then its children.
		want := []uint64{byOrdinal[0], kids[0], kids[1], kids[2], byOrdinal[1], byOrdinal[2]}
		if !slices.Equal(got, want) {
			t.Errorf("listed %v, want %v (by ordinal)", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A group's summary ranges are taken over exactly the leaves with a
// reward, and the leaves with an advantage.
func TestViewGroupRewardRange(t *testing.T) {
	db := viewerRun(t)
	rewarded := 0
	err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("m")
		return r.ForEachGroup(0, func(g model.Group) error {
			v, err := view.ViewGroup(r, g.ID)
			if err != nil {
				return err
			}
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			var want view.Range
			for _, n := range nodes {
				if n.Status.Leaf() && n.HasReward {
					if want.Count == 0 || n.Reward < want.Min {
						want.Min = n.Reward
					}
					if want.Count == 0 || n.Reward > want.Max {
						want.Max = n.Reward
					}
					want.Count++
				}
			}
			got := v.Summary.RewardRange
			if got.Count != want.Count || got.Min != want.Min || got.Max != want.Max {
				t.Errorf("group %d reward range %+v, want count %d, min %v, max %v", g.ID, got, want.Count, want.Min, want.Max)
			}
			rewarded += want.Count
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if rewarded == 0 {
		t.Fatal("no leaf has a reward: nothing was compared")
	}
}
