package replay_test

// WhatIf on damaged runs and bad overrides fails with the typed error and
// no report; its group filter analyses exactly the group asked for; its
// differences come in node id order whatever order the tree was built in.

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

var errRollback = errors.New("rollback")

// whatIfDamaged damages run id below the API inside a write transaction,
// runs WhatIf there and rolls back.
func whatIfDamaged(t *testing.T, db *store.DB, id string, damage func(tx *store.Tx), opts replay.WhatIfOptions) (*replay.WhatIfReport, error) {
	t.Helper()
	var rep *replay.WhatIfReport
	var werr error
	err := db.Update(func(tx *store.Tx) error {
		damage(tx)
		r, err := tx.Run(id)
		if err != nil {
			t.Fatal(err)
		}
		rep, werr = replay.WhatIf(r, opts)
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	return rep, werr
}

func TestWhatIfErrors(t *testing.T) {
	db, _ := handTree(t)
	// Reopened with a cold node cache: it holds the versions a commit wrote,
	// and damage put below the API is seen only by a read that misses it.
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = storetest.OpenPath(t, path, storetest.Options())
	put := func(bucket string, key []byte, val []byte) func(tx *store.Tx) {
		return func(tx *store.Tx) {
			b := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("hand"))
			if bucket != "" {
				b = b.Bucket([]byte(bucket))
			}
			if err := b.Put(key, val); err != nil {
				t.Fatal(err)
			}
		}
	}
	zero := 0
	cases := []struct {
		name   string
		damage func(tx *store.Tx)
		opts   replay.WhatIfOptions
		want   error
	}{
		{"run record damaged", put("", []byte("run"), []byte{1, 0, 0, 0, 0, 0xc1}), replay.WhatIfOptions{}, store.ErrCorrupt},
		{"node record damaged", put("nodes", []byte{0, 0, 0, 0, 0, 0, 0, 3}, []byte{1, 0, 0, 0, 0, 0xc1}), replay.WhatIfOptions{}, store.ErrCorrupt},
		{"group record damaged", func(tx *store.Tx) {
			c := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("hand")).Bucket([]byte("groups")).Cursor()
			k, _ := c.First()
			put("groups", append([]byte(nil), k...), []byte{1, 0, 0, 0, 0, 0xc1})(tx)
		}, replay.WhatIfOptions{}, store.ErrCorrupt},
		{"override the config rejects", func(*store.Tx) {}, replay.WhatIfOptions{Overrides: replay.Overrides{M: &zero}}, replay.ErrWhatIfValue},
		{"unknown group", func(*store.Tx) {}, replay.WhatIfOptions{Group: 99}, model.ErrNotFound},
	}
	for _, c := range cases {
		rep, err := whatIfDamaged(t, db, "hand", c.damage, c.opts)
		if !errors.Is(err, c.want) || rep != nil {
			t.Errorf("%s: report %v, error %v; want no report and %v", c.name, rep != nil, err, c.want)
		}
	}
}

func TestWhatIfGroupFilter(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("s")
	replaytest.BuildOneTx(t, db, spec)
	var groups []model.Group
	inRunView(t, db, spec.ID, func(r *store.RunTx) (err error) { groups, err = r.Groups(0); return err })
	if len(groups) < 2 {
		t.Fatalf("fixture has %d groups", len(groups))
	}
	for _, g := range groups {
		inRunView(t, db, spec.ID, func(r *store.RunTx) error {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			rep, err := replay.WhatIf(r, replay.WhatIfOptions{Group: g.ID})
			if err != nil {
				return err
			}
			if rep.Totals.Groups != 1 || rep.Totals.NodesRecorded != len(nodes) {
				t.Errorf("group %d: %d groups, %d nodes analysed; want 1, %d", g.ID, rep.Totals.Groups, rep.Totals.NodesRecorded, len(nodes))
			}
			for _, iv := range rep.Intervals {
				if iv.Group != g.ID || iv.Step != g.Step {
					t.Errorf("group %d: interval of step %d group %d", g.ID, iv.Step, iv.Group)
				}
			}
			return nil
		})
	}
}

func inRunView(t *testing.T, db *store.DB, id string, fn func(*store.RunTx) error) {
	t.Helper()
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(id)
		if err != nil {
			return err
		}
		return fn(r)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWhatIfDiffsInNodeOrder: root R=4 was added after A's children C=2
// and D=3, so the group lists it before them; the differences at interval
// 1 still come by node id.
//
//	interval 0: A=1 (0.9) expands (top, 2 children recorded, C and D
//	            sampled), R=4 (0.9) survives
//	interval 1: C (0.8) expands (top, no children sampled), D (0.6) and
//	            R (0.7) survive
func TestWhatIfDiffsInNodeOrder(t *testing.T) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.M, cfg.TopExpand, cfg.Delta = 2, 2, 1, 0.5
	two := []model.Turn{{Action: "a"}, {Action: "b"}}
	db := handRun(t, "order", cfg, func(r *store.RunTx, g model.Group, must func(error)) {
		add := func(parent uint64, fork, ord int) uint64 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ord})
			must(err)
			must(r.AppendTurns(n.ID, 0, two...))
			return n.ID
		}
		route := func(id uint64, iv, turn int, s, ref float64, action model.Action, rule string, kids int) {
			must(r.Score(id, model.Score{Interval: iv, Turn: turn, Value: s}))
			must(r.Route(id, model.Decision{Interval: iv, Action: action, Score: s, Reference: ref, Delta: 0.5, Rule: rule, Children: kids}))
		}
		a := add(0, 0, 0)
		route(a, 0, 2, 0.9, 0.9, model.ActionExpand, tree.RuleTop, 2)
		c, d := add(a, 2, 0), add(a, 2, 1)
		root := add(0, 0, 1)
		route(root, 0, 2, 0.9, 0.9, model.ActionSurvive, tree.RuleSurvive, 0)
		must(r.AppendTurns(root, 2, two...))
		route(c, 1, 4, 0.8, 0.8, model.ActionExpand, tree.RuleTop, 2)
		// Scored at turns outside their own: D before its fork point, R
		// past its last turn; a branch stopped there spends 0 or all its
		// own turns.
		route(d, 1, 1, 0.6, 0.8, model.ActionSurvive, tree.RuleSurvive, 0)
		route(root, 1, 9, 0.7, 0.8, model.ActionSurvive, tree.RuleSurvive, 0)
	})
	// Delta 0.05 prunes D and R at interval 1; C expands into 2 children
	// the run never sampled.
	rep := whatIf(t, db, "order", "delta=0.05")
	if len(rep.Intervals) != 2 {
		t.Fatalf("%d intervals, want 2", len(rep.Intervals))
	}
	var got []uint64
	for _, d := range rep.Intervals[1].Diffs {
		got = append(got, d.Node)
	}
	if want := []uint64{2, 3, 4}; !equalWant(got, want) {
		t.Errorf("differences at interval 1 for nodes %v, want %v", got, want)
	}
	// Turns A2 C2 D2 R4; D and R stop at interval 1: D spends none, R all 4.
	if tot := rep.Totals; tot.EnvStepsRecorded != 10 || tot.EnvSteps != 8 {
		t.Errorf("delta=0.05: env steps %d of %d, want 8 of 10", tot.EnvSteps, tot.EnvStepsRecorded)
	}
	// Top 2 expands R at interval 0 instead of letting it survive: its
	// interval-1 score is not routed, and its children were never sampled.
	rep = whatIf(t, db, "order", "top=2")
	if iv := rep.Intervals[1]; iv.Recorded != 3 || iv.Routed != 2 || !iv.Partial {
		t.Errorf("top=2 interval 1: %d of %d recorded branches routed (partial %t); want 2 of 3, partial", iv.Routed, iv.Recorded, iv.Partial)
	}
}

// TestWhatIfRuleOnly: the same action for another reason is a difference
// of its own: a prune by the median instead of the max, a survive under
// the width cap instead of a plain one.
func TestWhatIfRuleOnly(t *testing.T) {
	db, _ := handTree(t)
	cases := []struct {
		overrides string
		node      uint64
		rule      string
	}{
		// Median of 0.9 and 0.3 is 0.6; B (0.3) < 0.6 − 0.2: still
		// pruned, now by the median.
		{"rule=median,delta=0.2", 2, tree.RuleMedian},
		// Top 2 under a cap of 2 at interval 1: C and D both stay as
		// they are; D, recorded a plain survivor, is now held by the cap
		// (C, recorded expanded, survives instead).
		{"top=2,max_active=2", 4, tree.RuleWidthCap},
	}
	for _, c := range cases {
		rep := whatIf(t, db, "hand", c.overrides)
		var rule []replay.DecisionDiff
		for _, iv := range rep.Intervals {
			for _, d := range iv.Diffs {
				if d.Change == replay.RuleOnly {
					rule = append(rule, d)
				}
			}
		}
		if len(rule) != 1 || rule[0].Node != c.node || rule[0].WhatIf.Rule != c.rule || rule[0].WhatIf.Action != rule[0].Recorded.Action || rep.Totals.RuleOnly != 1 {
			t.Errorf("%q: rule-only differences %+v (total %d); want node %d by %s", c.overrides, rule, rep.Totals.RuleOnly, c.node, c.rule)
		}
	}
}

// TestWhatIfEmptySelection: a step or group the run does not have is
// ErrNotFound, step 1 and group 1 included; a run without groups has an
// empty what-if.
func TestWhatIfEmptySelection(t *testing.T) {
	db := storetest.Open(t)
	if err := db.Update(func(tx *store.Tx) error {
		_, err := replaytest.CreateRun(tx, replaytest.SmallSpec("empty"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	inRunView(t, db, "empty", func(r *store.RunTx) error {
		for _, o := range []replay.WhatIfOptions{{Step: 1}, {Group: 1}, {Step: 1, Group: 1}} {
			if rep, err := replay.WhatIf(r, o); !errors.Is(err, model.ErrNotFound) || rep != nil {
				t.Errorf("step %d group %d of an empty run: %v, want ErrNotFound", o.Step, o.Group, err)
			}
		}
		rep, err := replay.WhatIf(r, replay.WhatIfOptions{})
		if err != nil || len(rep.Intervals) != 0 || rep.Totals != (replay.WhatIfTotals{}) {
			t.Errorf("whole empty run: %+v, %v", rep, err)
		}
		return nil
	})
}

// TestWhatIfRepeatPruneWithoutRepeatConfig: a branch the run pruned for
// repeating is pruned again under any what-if config, even a base config
// given without RepeatPrune (it is not a what-if key).
func TestWhatIfRepeatPruneWithoutRepeatConfig(t *testing.T) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.M, cfg.TopExpand, cfg.Delta, cfg.RepeatPrune = 2, 2, 0, 0.5, 0
	db := handRun(t, "repeat", cfg, func(r *store.RunTx, g model.Group, must func(error)) {
		for i, s := range []float64{0.9, 0.8} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			must(err)
			must(r.AppendTurns(n.ID, 0, model.Turn{Action: "same"}, model.Turn{Action: "same"}))
			must(r.Score(n.ID, model.Score{Interval: 0, Turn: 2, Value: s}))
			d := model.Decision{Interval: 0, Action: model.ActionSurvive, Score: s, Reference: 0.9, Delta: 0.5, Rule: tree.RuleSurvive}
			if i == 1 {
				d.Action, d.Rule = model.ActionPrune, tree.RuleRepeat
			}
			must(r.Route(n.ID, d))
		}
	})
	inRunView(t, db, "repeat", func(r *store.RunTx) error {
		rep, err := replay.WhatIf(r, replay.WhatIfOptions{Base: &cfg})
		if err != nil {
			return err
		}
		if rep.Totals.Differ != 0 || rep.Totals.RepeatPrunes != 1 {
			t.Errorf("base without RepeatPrune: %+v; want the repeat prune reproduced", rep.Totals)
		}
		return nil
	})
}
