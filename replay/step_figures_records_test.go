package replay_test

import (
	"math"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// StepFigures agrees, step by step, with the figures counted straight
// from the step's groups and advantage records, and carries the rubric
// pool sizes of the last step that changed them.
func TestStepFiguresMatchRecords(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("f")
	replaytest.BuildOneTx(t, db, spec)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		figs, err := replay.StepFigures(r)
		if err != nil {
			return err
		}
		history, err := replay.PoolHistory(r)
		if err != nil {
			return err
		}
		if len(figs) != spec.Steps {
			t.Fatalf("%d steps of figures, want %d", len(figs), spec.Steps)
		}
		leavesSeen, zeroSeen := 0, 0
		for i, m := range figs {
			step := uint64(i + 1)
			gs, err := r.Groups(step)
			if err != nil {
				return err
			}
			want := model.StepMetrics{Step: step, Groups: len(gs)}
			wins, sum := 0, 0.0
			for _, g := range gs {
				if g.Status == model.GroupClosed {
					want.ClosedGroups++
				}
				advs, err := r.Advantages(step, g.ID)
				if err != nil {
					return err
				}
				zero, after := false, false
				for _, a := range advs {
					want.Leaves++
					sum += a.Outcome
					if a.Outcome > 0 {
						wins++
					}
					zero, after = zero || a.ZeroVariance, after || a.ZeroVarianceAfter
				}
				if zero {
					want.ZeroVariance++
					if !after {
						want.Unlocked++
					}
				}
			}
			if want.Leaves > 0 {
				want.Success, want.MeanReward = float64(wins)/float64(want.Leaves), sum/float64(want.Leaves)
			}
			if want.ClosedGroups > 0 {
				want.ZeroVarianceShare = float64(want.ZeroVariance) / float64(want.ClosedGroups)
			}
			if m.Step != want.Step || m.Groups != want.Groups || m.ClosedGroups != want.ClosedGroups || m.Leaves != want.Leaves ||
				m.ZeroVariance != want.ZeroVariance || m.Unlocked != want.Unlocked || !near(m.Success, want.Success) ||
				!near(m.MeanReward, want.MeanReward) || !near(m.ZeroVarianceShare, want.ZeroVarianceShare) {
				t.Errorf("step %d: %+v, want %+v", step, m, want)
			}
			var pools replay.PoolSizes
			for _, p := range history {
				if p.Step <= step {
					pools = p
				}
			}
			if m.Pools[model.PoolCandidate] != pools.Candidate || m.Pools[model.PoolPublic] != pools.Public ||
				m.Pools[model.PoolRetired] != pools.Retired || m.Pools[model.PoolMerged] != pools.Merged {
				t.Errorf("step %d pools %v, want %+v", step, m.Pools, pools)
			}
			leavesSeen += m.Leaves
			zeroSeen += m.ZeroVariance
		}
		if leavesSeen == 0 {
			t.Error("the fixture closed no group: nothing was compared")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
