package tree_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// TestAdvantagesShaping: with a shaping, advantages are GRPO over
// R = R_base + λ·score; the zero-variance flag before shaping is about the
// base rewards, the one after about the totals.
func TestAdvantagesShaping(t *testing.T) {
	g := model.Group{ID: 3, Step: 2}
	leaves := []tree.Leaf{{Node: model.Node{ID: 4}, Reward: 1}, {Node: model.Node{ID: 6}, Reward: 1}, {Node: model.Node{ID: 9}, Reward: 1}}
	sh := &tree.Shaping{Scores: []float64{-0.5, 0, 0.5}, Lambda: 0.1, Rubrics: []uint64{2, 5}}
	got := tree.Advantages(g, leaves, sh, grpo.DefaultEps)
	totals := []float64{0.95, 1, 1.05}
	adv, mean, std := refGRPO(totals, grpo.DefaultEps)
	for i, a := range got {
		want := model.Advantage{Step: 2, Group: 3, Leaf: leaves[i].Node.ID, Outcome: 1, RubricScore: sh.Scores[i], Lambda: 0.1,
			Total: a.Total, Mean: a.Mean, Std: a.Std, Advantage: a.Advantage, Rubrics: []uint64{2, 5}, ZeroVariance: true}
		if !reflect.DeepEqual(a, want) || !near(a.Total, totals[i]) || !near(a.Mean, mean) || !near(a.Std, std) || !near(a.Advantage, adv[i]) {
			t.Errorf("leaf %d: %+v, want %+v with total %v mean %v std %v advantage %v", i, a, want, totals[i], mean, std, adv[i])
		}
	}

	// Shaping that cancels the spread of the base rewards: informative
	// before, zero-variance after.
	leaves[0].Reward, leaves[2].Reward = 1.05, 0.95
	got = tree.Advantages(g, leaves, sh, grpo.DefaultEps)
	for _, a := range got {
		if a.ZeroVariance || !a.ZeroVarianceAfter || a.Advantage != 0 || a.Std != 0 {
			t.Errorf("cancelling shaping: %+v, want informative before, zero-variance after, advantage 0", a)
		}
	}

	// No shaping: plain GRPO, both flags on the base rewards.
	got = tree.Advantages(g, leaves, nil, grpo.DefaultEps)
	for i, a := range got {
		if a.Lambda != 0 || a.RubricScore != 0 || a.Rubrics != nil || a.Total != leaves[i].Reward || a.ZeroVariance || a.ZeroVarianceAfter {
			t.Errorf("no shaping: %+v", a)
		}
	}
}

// tasksWithGoal returns n tasks whose goal on the hash env's line is goal
// cells away.
func tasksWithGoal(goal, n int) []rollout.Task {
	var out []rollout.Task
	for i := 0; len(out) < n; i++ {
		tk := rollout.Task{ID: fmt.Sprintf("far-%d", i), Prompt: "p"}
		if goalOf(tk) == goal {
			out = append(out, tk)
		}
	}
	return out
}

// leavesOf rebuilds what the engine hands a Shaper for a stored group.
func leavesOf(t *testing.T, r *store.RunTx, g model.Group) []tree.Leaf {
	t.Helper()
	nodes, err := r.GroupNodes(g)
	if err != nil {
		t.Fatal(err)
	}
	var out []tree.Leaf
	for _, n := range nodes {
		if !n.Status.Leaf() {
			continue
		}
		tr, err := r.Trajectory(n.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tree.Leaf{Node: n, Reward: n.Reward, Turns: tr})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Node.ID < out[j-1].Node.ID; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestShaperAdvantages runs the engine with a Shaper: every group's
// advantages are GRPO over R_base + λ·score with the shaper's scores, the
// flags say whether the base rewards and the totals varied, and the
// shaper's own write sits in the close transaction, right before the
// group's advantages and its close.
func TestShaperAdvantages(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.RepeatPrune, cfg.Seed = 1, 3, 0, 2
	newRun(t, db, "r", cfg)
	o := hashOpts(cfg, tree.CommitInterval, false, nil)
	sh := &fakeShaper{lambda: 0.25}
	o.Shaper = sh
	e := mustEngine(t, db, "r", o)
	// Step 1: goals 7 cells away cannot be reached in 3 turns, so every
	// base reward is 0. Step 2: reachable goals, mixed rewards.
	if _, err := e.Rollout(context.Background(), 1, tasksWithGoal(7, 3)); err != nil {
		t.Fatal(err)
	}
	cfg.MaxTurns = 8
	o.Config = cfg
	o.Shaper = sh
	o.AllowConfigChange = true // a deliberate change, recorded in the run's config
	e = mustEngine(t, db, "r", o)
	if _, err := e.Rollout(context.Background(), 2, tasksWithGoal(4, 3)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sh.begun, []uint64{1, 2}) {
		t.Errorf("BeginStep calls %v, want [1 2]", sh.begun)
	}
	cov := coverage{}
	d := dumpRun(t, db, "r")
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for _, g := range d.Groups {
			leaves := leavesOf(t, r, g)
			scores := shapeScores(leaves)
			totals := make([]float64, len(leaves))
			zeroBase, zeroTotal := true, true
			for i, l := range leaves {
				totals[i] = l.Reward + 0.25*scores[i]
				zeroBase = zeroBase && l.Reward == leaves[0].Reward
				zeroTotal = zeroTotal && totals[i] == totals[0]
			}
			cov[fmt.Sprintf("step %d before %t after %t", g.Step, zeroBase, zeroTotal)]++
			adv, mean, std := refGRPO(totals, grpo.DefaultEps)
			advs, err := r.Advantages(g.Step, g.ID)
			if err != nil {
				return err
			}
			if len(advs) != len(leaves) {
				t.Fatalf("group %d: %d advantages for %d leaves", g.ID, len(advs), len(leaves))
			}
			for i, a := range advs {
				want := model.Advantage{Step: g.Step, Group: g.ID, Leaf: leaves[i].Node.ID, Outcome: leaves[i].Reward,
					RubricScore: scores[i], Lambda: 0.25, Total: a.Total, Mean: a.Mean, Std: a.Std, Advantage: a.Advantage,
					Rubrics: []uint64{7, 9}, ZeroVariance: zeroBase, ZeroVarianceAfter: zeroTotal}
				if !reflect.DeepEqual(a, want) || !near(a.Total, totals[i]) || !near(a.Mean, mean) || !near(a.Std, std) || !near(a.Advantage, adv[i]) {
					t.Errorf("group %d leaf %d: %+v\n want %+v with total %v mean %v std %v advantage %v",
						g.ID, i, a, want, totals[i], mean, std, adv[i])
				}
			}
			// The close transaction: the shaper's event, the advantages, the close.
			k := -1
			for i, ev := range d.Events {
				if ev.Kind == evShaped && ev.Group == g.ID {
					if k >= 0 {
						t.Errorf("group %d shaped twice", g.ID)
					}
					k = i
				}
			}
			if k < 0 || k+1+len(leaves) >= len(d.Events) {
				t.Fatalf("group %d: shaper event at %d of %d", g.ID, k, len(d.Events))
			}
			var ids []uint64
			if err := store.DecodePayload(d.Events[k], &ids); err != nil || !reflect.DeepEqual(ids, advLeaves(advs)) {
				t.Errorf("group %d: shaper event payload %v (%v), want the leaves %v", g.ID, ids, err, advLeaves(advs))
			}
			for i := range leaves {
				if ev := d.Events[k+1+i]; ev.Kind != model.EvAdvantage || ev.Group != g.ID || ev.Node != leaves[i].Node.ID {
					t.Errorf("group %d: event %d after the shaper's is %+v, want the advantage of leaf %d", g.ID, i+1, ev, leaves[i].Node.ID)
				}
			}
			if ev := d.Events[k+1+len(leaves)]; ev.Kind != model.EvGroupClose || ev.Group != g.ID {
				t.Errorf("group %d: %+v follows its advantages, want its close", g.ID, ev)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cov["step 1 before true after false"] == 0 || cov["step 2 before false after false"] == 0 {
		t.Errorf("groups seen %v: want zero-variance base rewards made informative by shaping in step 1, mixed rewards in step 2", cov)
	}
}

func advLeaves(as []model.Advantage) []uint64 {
	var out []uint64
	for _, a := range as {
		out = append(out, a.Leaf)
	}
	return out
}

// TestShaperApplyFails: Apply runs in the close transaction, so when it
// fails after writing its event, neither that event, nor any advantage, nor
// a closed group reaches the file; Resume then closes the groups exactly as
// an uninterrupted run does.
func TestShaperApplyFails(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 8, 6
	ts := tasks(2)
	opts := func(sh *fakeShaper) tree.Options {
		o := hashOpts(cfg, tree.CommitInterval, false, nil)
		o.Shaper = sh
		return o
	}
	newRun(t, db, "base", cfg)
	if _, err := mustEngine(t, db, "base", opts(&fakeShaper{lambda: 0.1})).Rollout(context.Background(), 1, ts); err != nil {
		t.Fatal(err)
	}
	want := dumpRun(t, db, "base")

	newRun(t, db, "r", cfg)
	_, err := mustEngine(t, db, "r", opts(&fakeShaper{lambda: 0.1, failApply: errApply})).Rollout(context.Background(), 1, ts)
	if !errors.Is(err, errApply) {
		t.Fatalf("Rollout with a failing Apply: %v, want errApply", err)
	}
	got := dumpRun(t, db, "r")
	for _, g := range got.Groups {
		if g.Status != model.GroupOpen {
			t.Errorf("group %d closed although its Apply failed", g.ID)
		}
	}
	if len(got.Adv) != 0 {
		t.Errorf("%d advantages written although Apply failed", len(got.Adv))
	}
	for _, ev := range got.Events {
		if ev.Kind == evShaped || ev.Kind == model.EvAdvantage || ev.Kind == model.EvGroupClose {
			t.Errorf("event %+v survived the failed close", ev)
		}
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Fatalf("check after the failed Apply: %v %v", vs, err)
	}
	if _, err := mustEngine(t, db, "r", opts(&fakeShaper{lambda: 0.1})).Resume(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if d := diffDump(dumpRun(t, db, "r"), want); d != "" {
		t.Errorf("resumed after the failed Apply, differs from the uninterrupted run: %s", d)
	}
}

// TestShaperDeclines: a Shaper that returns no shaping for a group leaves
// it plain GRPO (the run equals one without a shaper); one that returns
// the wrong number of scores is refused with ErrInvalid and the group stays
// open.
func TestShaperDeclines(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 8, 8
	ts := tasks(2)
	newRun(t, db, "plain", cfg)
	if _, err := mustEngine(t, db, "plain", hashOpts(cfg, tree.CommitInterval, false, nil)).Rollout(context.Background(), 1, ts); err != nil {
		t.Fatal(err)
	}
	newRun(t, db, "skip", cfg)
	o := hashOpts(cfg, tree.CommitInterval, false, nil)
	o.Shaper = &fakeShaper{lambda: 0.5, skip: true}
	if _, err := mustEngine(t, db, "skip", o).Rollout(context.Background(), 1, ts); err != nil {
		t.Fatalf("Rollout with a shaper that declines: %v", err)
	}
	if d := diffDump(dumpRun(t, db, "skip"), dumpRun(t, db, "plain")); d != "" {
		t.Errorf("declined shaping differs from no shaper: %s", d)
	}

	newRun(t, db, "bad", cfg)
	o.Shaper = &fakeShaper{lambda: 0.5, badCount: true}
	_, err := mustEngine(t, db, "bad", o).Rollout(context.Background(), 1, ts)
	if !errors.Is(err, tree.ErrInvalidShaping) {
		t.Errorf("shaper with one score too many: %v, want ErrInvalidShaping", err)
	}
	for _, g := range dumpRun(t, db, "bad").Groups {
		if g.Status != model.GroupOpen {
			t.Errorf("group %d closed with a bad shaping", g.ID)
		}
	}
}
