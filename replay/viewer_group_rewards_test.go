package replay_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// A group's summary ranges are taken over exactly the leaves with a
// reward, and the leaves with an advantage.
func TestViewGroupRewardRange(t *testing.T) {
	db := viewerRun(t)
	rewarded := 0
	err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("m")
		return r.ForEachGroup(0, func(g model.Group) error {
			v, err := replay.ViewGroup(r, g.ID)
			if err != nil {
				return err
			}
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			var want replay.Range
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
