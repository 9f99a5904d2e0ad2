package replay_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func runStats(t *testing.T, db *store.DB, run string) *replay.RunStats {
	t.Helper()
	var st *replay.RunStats
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		st, err = replay.Stats(r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStatsHandTree checks every figure against the tree drawn in handTree.
func TestStatsHandTree(t *testing.T) {
	db, _ := handTree(t)
	st := runStats(t, db, "hand")
	if len(st.Steps) != 1 {
		t.Fatalf("%d steps", len(st.Steps))
	}
	s := st.Steps[0]
	// Leaves: B (pruned, path 2), D (6), E (5), F (6) → 19 materialised
	// turns for 13 stored.
	mean := 1.0 / 4 // over the four rewarded leaves: one reward of 1
	want := replay.StepStats{Step: 1, Groups: 1, Nodes: 6, Leaves: 4, Rewarded: 4, MeanReward: &mean, TurnsStored: 13, TurnsMaterialised: 19,
		PrefixSharing: 19.0 / 13, Expansions: 2, Prunes: 1, Survivals: 1, PrunesByRule: map[string]int{"max": 1},
		LeavesPerGroup: 4, MinLeaves: 4, MaxLeaves: 4,
		Completed: replay.LeafStats{Count: 3, Rewarded: 3, RewardSum: 1, MeanReward: 1.0 / 3}, // D=4 → 0, E=5 → 1, F=6 → 0
		Pruned:    replay.LeafStats{Count: 1, Rewarded: 1, MeanReward: 0}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("step stats\n got  %+v\n want %+v", s, want)
	}
	tot := st.Total
	tot.Step = 1
	if !reflect.DeepEqual(tot, want) {
		t.Errorf("total\n got  %+v\n want %+v", tot, want)
	}
	if st.Pools != nil {
		t.Errorf("pools %v for a run without rubrics", st.Pools)
	}
}

// TestStatsFixture cross-checks the statistics of a larger run against the
// state replay rebuilds from the log, and the pool history against what
// the fixture does to its rubrics.
func TestStatsFixture(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("m")
	replaytest.BuildOneTx(t, db, spec)
	st := runStats(t, db, spec.ID)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		state, err := replay.StateAt(r, r.LastSeq())
		if err != nil {
			return err
		}
		perStep := map[uint64]*replay.StepStats{}
		for _, g := range state.GroupList() {
			s := perStep[g.Step]
			if s == nil {
				s = &replay.StepStats{Step: g.Step}
				perStep[g.Step] = s
			}
			s.Groups++
			for _, n := range state.GroupNodes(g.ID) {
				s.Nodes++
				s.TurnsStored += n.Turns
				if n.Status.Leaf() {
					s.Leaves++
					// The materialised path, walked through the state.
					p, l := n, n.Turns
					for p.Parent != 0 {
						l += p.Fork
						p = state.Nodes[p.Parent]
					}
					s.TurnsMaterialised += l
				}
				for _, d := range n.Decisions {
					switch d.Action {
					case model.ActionExpand:
						s.Expansions++
					case model.ActionPrune:
						s.Prunes++
					case model.ActionSurvive:
						s.Survivals++
					}
				}
			}
		}
		zvBefore, zvAfter := map[[2]uint64]bool{}, map[[2]uint64]bool{}
		for k, a := range state.Advantages {
			if a.ZeroVariance {
				zvBefore[[2]uint64{k.Step, k.Group}] = true
			}
			if a.ZeroVarianceAfter {
				zvAfter[[2]uint64{k.Step, k.Group}] = true
			}
		}
		if len(st.Steps) != spec.Steps {
			t.Fatalf("%d steps, want %d", len(st.Steps), spec.Steps)
		}
		sumBefore, sumAfter := 0, 0
		for _, s := range st.Steps {
			w := perStep[s.Step]
			got := [8]int{s.Groups, s.Nodes, s.Leaves, s.TurnsStored, s.TurnsMaterialised, s.Expansions, s.Prunes, s.Survivals}
			exp := [8]int{w.Groups, w.Nodes, w.Leaves, w.TurnsStored, w.TurnsMaterialised, w.Expansions, w.Prunes, w.Survivals}
			if got != exp {
				t.Errorf("step %d: groups/nodes/leaves/stored/materialised/expansions/prunes/survivals %v, want %v", s.Step, got, exp)
			}
			if s.Completed.Count+s.Pruned.Count+s.Truncated.Count != s.Leaves || s.AdvGroups != s.Groups {
				t.Errorf("step %d: leaves by kind %+v %+v %+v of %d; %d groups with advantages", s.Step, s.Completed, s.Pruned, s.Truncated, s.Leaves, s.AdvGroups)
			}
			if s.PrefixSharing <= 1 {
				t.Errorf("step %d: prefix sharing %v; trees with expansions share prefixes", s.Step, s.PrefixSharing)
			}
			sumBefore += s.ZeroVarBefore
			sumAfter += s.ZeroVarAfter
		}
		if sumBefore != len(zvBefore) || sumAfter != len(zvAfter) || st.Total.ZeroVarBefore != sumBefore {
			t.Errorf("zero-variance groups before/after %d/%d (total %d), want %d/%d", sumBefore, sumAfter, st.Total.ZeroVarBefore, len(zvBefore), len(zvAfter))
		}
		if st.Total.UnlockedGroups != st.Total.ZeroVarBefore-st.Total.ZeroVarAfter || st.Total.ZeroVarBefore == 0 {
			t.Errorf("unlocked %d of %d zero-variance groups (%d after); the fixture should have some", st.Total.UnlockedGroups, st.Total.ZeroVarBefore, st.Total.ZeroVarAfter)
		}
		// Mean rewards of completed leaves, from the state.
		var sum float64
		var n int
		for _, nd := range state.Nodes {
			if nd.Status == model.NodeCompleted && nd.HasReward {
				sum += nd.Reward
				n++
			}
		}
		if n == 0 || math.Abs(st.Total.Completed.MeanReward-sum/float64(n)) > 1e-12 || st.Total.Completed.Rewarded != n {
			t.Errorf("completed mean reward %v over %d, want %v over %d", st.Total.Completed.MeanReward, st.Total.Completed.Rewarded, sum/float64(n), n)
		}
		if st.Events != r.LastSeq() || st.Bytes <= 0 {
			t.Errorf("events %d, bytes %d", st.Events, st.Bytes)
		}
		for _, b := range st.Buckets {
			if b.Name == "events" && uint64(b.Keys) != r.LastSeq() {
				t.Errorf("events bucket holds %d keys, log ends at %d", b.Keys, r.LastSeq())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Step by step (see replaytest.GrowRun): two drafts a step; from step 2 one is
	// promoted and one merged; from step 3 the older public one retires.
	want := []replay.PoolSizes{
		{Step: 1, Candidate: 2},
		{Step: 2, Candidate: 2, Public: 1, Merged: 1},
		{Step: 3, Candidate: 2, Public: 1, Merged: 2, Retired: 1},
		{Step: 4, Candidate: 2, Public: 1, Merged: 3, Retired: 2},
	}
	if !reflect.DeepEqual(st.Pools, want) {
		t.Errorf("pools\n got  %+v\n want %+v", st.Pools, want)
	}
}
