package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// fixture builds the golden fixture in a fresh temp dir and returns its
// path. The file is closed (the CLI needs the lock) and fully checked when
// the test ends.
func fixture(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "patr.db")
	buildFixture(tb, path)
	return path
}

// buildFixture writes the store every golden file is rendered from. It is
// the only place that knows what the fixture holds, so swapping it for a
// fixed-seed `patrdb demo` run changes this one function (and the goldens,
// regenerated with -update).
//
// Run "patr-4x4" is a PaTR run on FrozenLake-shaped turns (B0=3, K=2, M=2,
// top-1 expansion, Delta 0.5, max rule), written interval by interval the
// way the engine commits:
//
//	step 1, group 1 "4x4/map-0": roots 1,2,3 → i0: 1 expands into 4,5
//	  (fork at turn 2), 2 survives, 3 is pruned (0.10 < max 0.80 − 0.50);
//	  i1: 2 completes (reward 1), 5 falls in a hole (0), 4 survives;
//	  i2: 4 completes (1). Advantages over leaves 2,3,4,5, shaped by rubric 4.
//	step 1, group 2 "4x4/map-1": roots 6,7, both fail (0, 6 completed, 7
//	  truncated): zero variance before shaping, unlocked after.
//	checkpoint for step 1 (inline policy bytes) → last step 1.
//	rubrics: candidates 1, 6; drafts 2, 3 merged into public 4; 5 retired.
//	step 2, group 3 "4x4/map-0" open: roots 8,9,10 → i0: 9 expands into
//	  11,12, 8 and 10 survive; 11 has one turn. Frontier: 8, 10, 11, 12.
//
// Run "grpo-4x4" is a small failed GRPO baseline: one closed group of two
// leaves, no scores, no checkpoint.
func buildFixture(tb testing.TB, path string) {
	tb.Helper()
	buildFixtureOpts(tb, path, storetest.Options())
}

// buildFixtureOpts is buildFixture with the store options (the damaged
// fixtures use small pages, so that the runs' b-trees have branch pages).
func buildFixtureOpts(tb testing.TB, path string, opts *store.Options) {
	tb.Helper()
	db := storetest.OpenPath(tb, path, opts)
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("fixture: %v", err)
		}
	}
	tok := uint32(1000)
	turn := func(action, obs string, reward float64, done bool) model.Turn {
		tok += 10
		return model.Turn{
			Action: action, ActionTokens: []uint32{tok, tok + 1}, ActionLogprobs: []float32{-0.25, -0.5},
			Observation: obs, ObservationTokens: []uint32{tok + 5, tok + 6, tok + 7}, Reward: reward, Done: done,
		}
	}
	update := func(fn func(r *store.RunTx) error) {
		tb.Helper()
		must(db.UpdateRun("patr-4x4", func(r *store.RunTx) error {
			return fn(r)
		}))
	}
	node := func(r *store.RunTx, step, group, parent uint64, fork, ordinal int) uint64 {
		tb.Helper()
		n, err := r.AddNode(store.NodeSpec{Step: step, Group: group, Parent: parent, Fork: fork, Ordinal: ordinal, Worker: "w0"})
		must(err)
		return n.ID
	}
	route := func(r *store.RunTx, id uint64, interval int, action model.Action, rule string, score, ref float64, children int) {
		tb.Helper()
		must(r.Route(id, model.Decision{Interval: interval, Action: action, Score: score, Reference: ref, Delta: 0.5, Rule: rule, Children: children}))
	}
	finish := func(r *store.RunTx, id uint64, status model.NodeStatus, reward float64) {
		tb.Helper()
		if status != model.NodePruned {
			must(r.SetNodeStatus(id, status))
		}
		must(r.SetReward(id, reward))
	}
	// closeGroup shapes the outcomes with the rubric scores, computes GRPO
	// advantages the way the engine does, and closes the group.
	closeGroup := func(r *store.RunTx, step, group uint64, leaves []uint64, outcome, rubric []float64) {
		tb.Helper()
		const lambda = 0.1
		before := grpo.Advantages(outcome, 1e-6)
		totals := grpo.Shape(outcome, rubric, lambda)
		after := grpo.Advantages(totals, 1e-6)
		for i, leaf := range leaves {
			must(r.PutAdvantage(model.Advantage{
				Step: step, Group: group, Leaf: leaf, Outcome: outcome[i], RubricScore: rubric[i], Lambda: lambda,
				Total: totals[i], Mean: after.Mean, Std: after.Std, Advantage: after.Adv[i], Rubrics: []uint64{4},
				ZeroVariance: before.ZeroVariance, ZeroVarianceAfter: after.ZeroVariance,
			}))
		}
		must(r.CloseGroup(step, group))
	}

	config := []byte(`{"tree":{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.5,"prune_rule":"max","repeat_prune":6,"max_turns":20,"seed":7},` +
		`"rubrics":{"var_min":0.01,"rho_min":0.2,"consolidate_at":8,"retire_streak":5,"active":2,"lambda":0.1}}`)
	must(db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun("patr-4x4", config, map[string]string{"env": "frozenlake-4x4", "mode": "patr"})
		return err
	}))

	// Step 1, group 1, interval 0.
	var g1, g2 model.Group
	var n1, n2, n3, n4, n5, n6, n7 uint64
	update(func(r *store.RunTx) error {
		var err error
		g1, err = r.OpenGroup(store.GroupSpec{Step: 1, Task: "4x4/map-0", Prompt: "Reach G without falling into a hole.", Gold: "G"})
		must(err)
		n1, n2, n3 = node(r, 1, g1.ID, 0, 0, 0), node(r, 1, g1.ID, 0, 0, 1), node(r, 1, g1.ID, 0, 0, 2)
		must(r.AppendTurns(n1, 0, turn("right", "SFFF\nFHFH\nFFFH\nHFFG\nat 1", 0, false), turn("down", "at 5 (H next)", 0, false)))
		must(r.AppendTurns(n2, 0, turn("down", "at 4", 0, false), turn("down", "at 8", 0, false)))
		must(r.AppendTurns(n3, 0, turn("left", "at 0 (wall)", 0, false), turn("left", "at 0 (wall)", 0, false)))
		must(r.Score(n1, model.Score{Interval: 0, Turn: 2, Value: 0.8}))
		must(r.Score(n2, model.Score{Interval: 0, Turn: 2, Value: 0.6}))
		must(r.Score(n3, model.Score{Interval: 0, Turn: 2, Value: 0.1}))
		route(r, n1, 0, model.ActionExpand, "top", 0.8, 0.8, 2)
		route(r, n2, 0, model.ActionSurvive, "survive", 0.6, 0.8, 0)
		route(r, n3, 0, model.ActionPrune, "max", 0.1, 0.8, 0)
		n4, n5 = node(r, 1, g1.ID, n1, 2, 0), node(r, 1, g1.ID, n1, 2, 1)
		return r.SetGroupInterval(1, g1.ID, 1)
	})
	// Interval 1.
	update(func(r *store.RunTx) error {
		must(r.AppendTurns(n2, 2, turn("right", "at 9", 0, false), turn("right", "at 10\nnext to G", 1, true)))
		finish(r, n2, model.NodeCompleted, 1)
		finish(r, n3, model.NodePruned, 0)
		must(r.AppendTurns(n4, 0, turn("down", "at 9", 0, false), turn("right", "at 10", 0, false)))
		must(r.Score(n4, model.Score{Interval: 1, Turn: 4, Value: 0.7}))
		route(r, n4, 1, model.ActionSurvive, "survive", 0.7, 0.7, 0)
		must(r.AppendTurns(n5, 0, turn("right", "at 7 (H)", 0, true)))
		finish(r, n5, model.NodeCompleted, 0)
		return r.SetGroupInterval(1, g1.ID, 2)
	})
	// Interval 2: the last branch ends; advantages close the group.
	update(func(r *store.RunTx) error {
		must(r.AppendTurns(n4, 2, turn("down", "at 14", 0, false), turn("right", "at 15 (G)", 1, true)))
		finish(r, n4, model.NodeCompleted, 1)
		must(r.SetGroupInterval(1, g1.ID, 3))
		closeGroup(r, 1, g1.ID, []uint64{n2, n3, n4, n5}, []float64{1, 0, 1, 0}, []float64{0.25, -0.5, 0.5, -0.25})
		return nil
	})

	// Step 1, group 2: every branch fails; only the rubric separates them.
	update(func(r *store.RunTx) error {
		var err error
		g2, err = r.OpenGroup(store.GroupSpec{Step: 1, Task: "4x4/map-1", Prompt: "Reach G without falling into a hole.", Gold: "G"})
		must(err)
		n6, n7 = node(r, 1, g2.ID, 0, 0, 0), node(r, 1, g2.ID, 0, 0, 1)
		must(r.AppendTurns(n6, 0, turn("right", "at 1", 0, false), turn("right", "at 2", 0, false)))
		must(r.AppendTurns(n7, 0, turn("up", "at 0 (wall)", 0, false), turn("up", "at 0 (wall)", 0, false)))
		must(r.Score(n6, model.Score{Interval: 0, Turn: 2, Value: 0.4}))
		must(r.Score(n7, model.Score{Interval: 0, Turn: 2, Value: 0.3}))
		route(r, n6, 0, model.ActionSurvive, "survive", 0.4, 0.4, 0)
		route(r, n7, 0, model.ActionSurvive, "survive", 0.3, 0.4, 0)
		must(r.SetGroupInterval(1, g2.ID, 1))
		must(r.AppendTurns(n6, 2, turn("down", "at 6", 0, false), turn("down", "at 10", 0, false), turn("left", "at 9 (H)", 0, true)))
		finish(r, n6, model.NodeCompleted, 0)
		must(r.AppendTurns(n7, 2, turn("up", "at 0 (wall)", 0, false)))
		finish(r, n7, model.NodeTruncated, 0)
		must(r.SetGroupInterval(1, g2.ID, 2))
		return nil
	})

	// Rubrics induced in step 1, then consolidation and a retirement.
	update(func(r *store.RunTx) error {
		var corr rubricpool.Corr
		corr.AddAll([]float64{0.75, 0.25, 1, 0, 0.5, 0.5}, []float64{1, 0, 1, 0, 0, 1})
		put := func(rb model.Rubric) uint64 {
			tb.Helper()
			rb.CreatedStep = 1
			if rb.Usage.Activations == 0 {
				rb.Usage.LastActivation = -1
			}
			got, err := r.PutRubric(rb)
			must(err)
			return got.ID
		}
		origin := model.RubricOrigin{Step: 1, Group: g1.ID, Anchors: []uint64{n4, n5, n3}}
		put(model.Rubric{Pool: model.PoolCandidate, Text: "Moves away from holes before moving toward the goal.", Origin: origin, Support: 1, Variance: 0.08, Rho: 0.61})
		d2 := put(model.Rubric{Pool: model.PoolCandidate, Text: "Avoids stepping next to a hole.", Origin: origin, Support: 2, Variance: 0.06, Rho: 0.45})
		d3 := put(model.Rubric{Pool: model.PoolCandidate, Text: "Keeps its distance from holes on the way to G.",
			Origin: model.RubricOrigin{Step: 1, Group: g1.ID, Anchors: []uint64{n2, n5, n4}}, Support: 1, Variance: 0.05, Rho: 0.33})
		pub := put(model.Rubric{Pool: model.PoolPublic, Text: "Stays clear of holes while approaching the goal.",
			Feature: "hole_distance", Parents: []uint64{d2, d3}, Support: 3, Variance: 0.06, Rho: 0.45,
			Usage: model.RubricUsage{Activations: 2, LastActivation: 1, PairsJudged: 6, LastVariance: 0.0625, GroupsUnlocked: 1,
				N: corr.N, SumX: corr.SumX, SumY: corr.SumY, SumXY: corr.SumXY, SumXX: corr.SumXX, SumYY: corr.SumYY}})
		for _, d := range []uint64{d2, d3} {
			_, err := r.MoveRubric(d, store.RubricMove{To: model.PoolMerged, Step: 1, MergedInto: pub})
			must(err)
		}
		old := put(model.Rubric{Pool: model.PoolPublic, Text: "Prefers the shortest path.", Support: 1, Variance: 0.02, Rho: 0.21,
			Usage: model.RubricUsage{Activations: 6, LastActivation: 1, PairsJudged: 12, LowVarStreak: 6, LastVariance: 0.001, N: 2, SumX: 1, SumY: 1, SumXY: 0.5, SumXX: 0.5, SumYY: 0.5}})
		_, err := r.MoveRubric(old, store.RubricMove{To: model.PoolRetired, Step: 1, Reason: "low-variance streak 6 > 5"})
		must(err)
		put(model.Rubric{Pool: model.PoolCandidate, Text: "Does not walk into a wall repeatedly.",
			Origin: model.RubricOrigin{Step: 1, Group: g1.ID, Anchors: []uint64{n2, n3, n5}}, Support: 1, Variance: 0.04, Rho: 0.52})
		return nil
	})

	// Close group 2 with rubric 4's scores, then checkpoint step 1.
	update(func(r *store.RunTx) error {
		closeGroup(r, 1, g2.ID, []uint64{n6, n7}, []float64{0, 0}, []float64{0.5, -0.5})
		return r.PutCheckpoint(model.Checkpoint{Step: 1, Inline: []byte("policy-table:16x4:float32:....rng"), Meta: map[string]string{"policy": "tabular-softmax"}})
	})

	// Step 2, group 3: interrupted after its first interval.
	update(func(r *store.RunTx) error {
		g3, err := r.OpenGroup(store.GroupSpec{Step: 2, Task: "4x4/map-0", Prompt: "Reach G without falling into a hole.", Gold: "G"})
		must(err)
		n8, n9, n10 := node(r, 2, g3.ID, 0, 0, 0), node(r, 2, g3.ID, 0, 0, 1), node(r, 2, g3.ID, 0, 0, 2)
		for _, id := range []uint64{n8, n9, n10} {
			must(r.AppendTurns(id, 0, turn("down", "at 4", 0, false), turn("right", fmt.Sprintf("at 5 (node %d)", id), 0, false)))
		}
		must(r.Score(n8, model.Score{Interval: 0, Turn: 2, Value: 0.5}))
		must(r.Score(n9, model.Score{Interval: 0, Turn: 2, Value: 0.9}))
		must(r.Score(n10, model.Score{Interval: 0, Turn: 2, Value: 0.45}))
		route(r, n9, 0, model.ActionExpand, "top", 0.9, 0.9, 2)
		route(r, n8, 0, model.ActionSurvive, "survive", 0.5, 0.9, 0)
		route(r, n10, 0, model.ActionSurvive, "survive", 0.45, 0.9, 0)
		n11 := node(r, 2, g3.ID, n9, 2, 0)
		node(r, 2, g3.ID, n9, 2, 1)
		must(r.AppendTurns(n11, 0, turn("down", "at 9", 0, false)))
		return r.SetGroupInterval(2, g3.ID, 1)
	})

	// The GRPO baseline: no scoring, every branch runs to the end.
	must(db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("grpo-4x4", []byte(`{"tree":{"b0":2,"no_scoring":true}}`), map[string]string{"env": "frozenlake-4x4", "mode": "grpo"})
		must(err)
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "4x4/map-0"})
		must(err)
		a := node(r, 1, g.ID, 0, 0, 0)
		b := node(r, 1, g.ID, 0, 0, 1)
		must(r.AppendTurns(a, 0, turn("down", "at 4", 0, false), turn("down", "at 8", 1, true)))
		must(r.AppendTurns(b, 0, turn("right", "at 5 (H)", 0, true)))
		finish(r, a, model.NodeCompleted, 1)
		finish(r, b, model.NodeCompleted, 0)
		res := grpo.Advantages([]float64{1, 0}, 1e-6)
		for i, leaf := range []uint64{a, b} {
			must(r.PutAdvantage(model.Advantage{Step: 1, Group: g.ID, Leaf: leaf, Outcome: float64(1 - i), Total: float64(1 - i),
				Mean: res.Mean, Std: res.Std, Advantage: res.Adv[i]}))
		}
		must(r.CloseGroup(1, g.ID))
		return r.SetRunStatus(model.RunFailed)
	}))
	must(db.Close())
}
