package replay_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

func whatIf(t *testing.T, db *store.DB, run, overrides string) *replay.WhatIfReport {
	t.Helper()
	o, err := replay.ParseWhatIf(overrides)
	if err != nil {
		t.Fatalf("ParseWhatIf(%q): %v", overrides, err)
	}
	var rep *replay.WhatIfReport
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		rep, err = replay.WhatIf(r, replay.WhatIfOptions{Overrides: o})
		return err
	})
	if err != nil {
		t.Fatalf("WhatIf(%q): %v", overrides, err)
	}
	return rep
}

// recordedDecisions counts the run's decisions by rule.
func recordedDecisions(t *testing.T, db *store.DB, run string) (total int, byRule map[string]int, turns int) {
	t.Helper()
	byRule = map[string]int{}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		return r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			for _, n := range nodes {
				turns += n.Turns
				for _, d := range n.Decisions {
					total++
					byRule[d.Rule]++
				}
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, byRule, turns
}

// TestWhatIfRecordedConfigReproduces: with the run's own config, re-running
// the routing over the recorded scores gives back every recorded decision.
func TestWhatIfRecordedConfigReproduces(t *testing.T) {
	median := replaytest.MediumSpec("median")
	median.Cfg.PruneRule, median.Cfg.Delta, median.Seed = tree.PruneMedian, 0.2, 3
	for _, spec := range []replaytest.RunSpec{replaytest.SmallSpec("small"), replaytest.MediumSpec("medium"), median} {
		t.Run(spec.ID, func(t *testing.T) {
			db := storetest.Open(t)
			replaytest.BuildOneTx(t, db, spec)
			total, byRule, turns := recordedDecisions(t, db, spec.ID)
			rep := whatIf(t, db, spec.ID, "")
			if !rep.BaseRecorded || rep.Base != spec.Cfg || rep.Config != spec.Cfg {
				t.Errorf("base %+v (recorded %v), config %+v; want the run's %+v", rep.Base, rep.BaseRecorded, rep.Config, spec.Cfg)
			}
			tot := rep.Totals
			if tot.Differ != 0 || tot.DiffIntervals != 0 || tot.Unobserved != 0 || tot.PartialIntervals != 0 {
				t.Errorf("recorded config differs from the record: %+v", tot)
			}
			for _, iv := range rep.Intervals {
				for _, d := range iv.Diffs {
					t.Errorf("step %d group %d interval %d node %d: %s: recorded %+v, what-if %+v",
						iv.Step, iv.Group, iv.Interval, d.Node, d.Change, d.Recorded, d.WhatIf)
				}
				if iv.Routed != iv.Recorded {
					t.Errorf("interval %d of group %d routed %d of %d recorded branches", iv.Interval, iv.Group, iv.Routed, iv.Recorded)
				}
			}
			if tot.Decisions != total || tot.NodesReached != tot.NodesRecorded || tot.EnvSteps != turns || tot.EnvStepsRecorded != turns {
				t.Errorf("totals %+v; want %d decisions, every node reached, %d env steps", tot, total, turns)
			}
			// The fixture must exercise what makes reproduction hard.
			if byRule[tree.RuleRepeat] == 0 || byRule[tree.RuleTop] == 0 || byRule[tree.RuleSurvive] == 0 {
				t.Errorf("fixture lacks repeat prunes, expansions or survivals: %v", byRule)
			}
			if spec.Cfg.MaxActive > 0 && byRule[tree.RuleWidthCap] == 0 {
				t.Errorf("fixture with MaxActive %d never hit the width cap: %v", spec.Cfg.MaxActive, byRule)
			}
			if tot.RepeatPrunes != byRule[tree.RuleRepeat] || tot.Prunes != byRule[string(spec.Cfg.PruneRule)] {
				t.Errorf("prunes %d (repeat %d), recorded %v", tot.Prunes, tot.RepeatPrunes, byRule)
			}
		})
	}
}

// TestWhatIfDeltaAboveOnePrunesNothing: scores live in [0,1], so no score
// is below max − delta when delta > 1; only the repeat prunes (not a
// what-if key) remain.
func TestWhatIfDeltaAboveOnePrunesNothing(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("m")
	replaytest.BuildOneTx(t, db, spec)
	_, byRule, _ := recordedDecisions(t, db, spec.ID)
	if byRule[tree.RuleMax] == 0 {
		t.Fatalf("fixture has no score-based prunes to undo: %v", byRule)
	}
	for _, o := range []string{"delta=1.5", "delta=1.01,rule=median"} {
		rep := whatIf(t, db, spec.ID, o)
		if rep.Totals.Prunes != 0 {
			t.Errorf("%s: %d score-based prunes", o, rep.Totals.Prunes)
		}
		if rep.Totals.RepeatPrunes == 0 {
			t.Errorf("%s: the recorded repeat prunes should stay", o)
		}
		undone := 0
		for _, iv := range rep.Intervals {
			for _, d := range iv.Diffs {
				if d.WhatIf.Action == model.ActionPrune && d.WhatIf.Rule != tree.RuleRepeat {
					t.Errorf("%s: node %d pruned by %s", o, d.Node, d.WhatIf.Rule)
				}
				if d.Recorded.Action == model.ActionPrune && d.WhatIf.Action != model.ActionPrune {
					undone++
				}
			}
		}
		if undone == 0 || rep.Totals.Unobserved < undone {
			t.Errorf("%s: %d recorded prunes undone, %d unobserved; want some, each with unobserved branches", o, undone, rep.Totals.Unobserved)
		}
	}
	// And the other way: delta 0 prunes everything below the best, earlier.
	rep := whatIf(t, db, spec.ID, "delta=0")
	if rep.Totals.PrunedEarlier == 0 || rep.Totals.EnvSteps >= rep.Totals.EnvStepsRecorded || rep.Totals.NodesReached >= rep.Totals.NodesRecorded {
		t.Errorf("delta=0: %+v; want earlier prunes, fewer env steps and nodes", rep.Totals)
	}
}

// handTree writes one group by hand (2 turns per interval):
//
//	interval 0: A=1 (0.9) expands into C=3, D=4; B=2 (0.3) is pruned (max)
//	interval 1: C (0.8) expands into E=5, F=6; D (0.6) survives
//	then D runs 2 more turns and completes, E completes after 1 turn, F
//	after 2; nothing is scored at interval 2.
//
// Recorded config: B0 2, M 2, top 1, delta 0.5, max; turns A2 B2 C2 D4 E1
// F2 = 13.
func handTree(t *testing.T) (*store.DB, tree.Config) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.M, cfg.TopExpand, cfg.Delta = 2, 2, 1, 0.5
	turn := func(a string) model.Turn { return model.Turn{Action: a, ActionTokens: []uint32{1}, Observation: "o"} }
	two := []model.Turn{turn("a"), turn("b")}
	db := handRun(t, "hand", cfg, func(r *store.RunTx, g model.Group, must func(error)) {
		add := func(parent uint64, fork, ord int) uint64 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ord})
			must(err)
			return n.ID
		}
		route := func(id uint64, iv, turn int, s, ref float64, action model.Action, rule string, kids int) {
			must(r.Score(id, model.Score{Interval: iv, Turn: turn, Value: s}))
			must(r.Route(id, model.Decision{Interval: iv, Action: action, Score: s, Reference: ref, Delta: 0.5, Rule: rule, Children: kids}))
		}
		a, b := add(0, 0, 0), add(0, 0, 1)
		must(r.AppendTurns(a, 0, two...))
		must(r.AppendTurns(b, 0, two...))
		route(a, 0, 2, 0.9, 0.9, model.ActionExpand, tree.RuleTop, 2)
		route(b, 0, 2, 0.3, 0.9, model.ActionPrune, tree.RuleMax, 0)
		must(r.SetReward(b, 0))
		c, d := add(a, 2, 0), add(a, 2, 1)
		must(r.AppendTurns(c, 0, two...))
		must(r.AppendTurns(d, 0, two...))
		route(c, 1, 4, 0.8, 0.8, model.ActionExpand, tree.RuleTop, 2)
		route(d, 1, 4, 0.6, 0.8, model.ActionSurvive, tree.RuleSurvive, 0)
		e, f := add(c, 2, 0), add(c, 2, 1)
		must(r.AppendTurns(d, 2, two...))
		must(r.AppendTurns(e, 0, turn("x")))
		must(r.AppendTurns(f, 0, two...))
		for _, id := range []uint64{d, e, f} {
			must(r.SetReward(id, float64(id%2)))
			must(r.SetNodeStatus(id, model.NodeCompleted))
		}
	})
	return db, cfg
}

// handRun writes run id with cfg and one group at step 1 in one
// transaction; build adds the group's nodes, passing errors to must (the
// first one fails the test).
func handRun(t *testing.T, id string, cfg tree.Config, build func(r *store.RunTx, g model.Group, must func(error))) *store.DB {
	t.Helper()
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, err := replaytest.CreateRun(tx, replaytest.RunSpec{ID: id, Cfg: cfg})
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t"})
		if err != nil {
			return err
		}
		build(r, g, func(e error) {
			if e != nil && err == nil {
				err = e
			}
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestWhatIfHandTree(t *testing.T) {
	db, _ := handTree(t)
	type want struct {
		differ, pruned, expanded, survived, children int
		unobserved, reached, envSteps, partial       int
		diffNodes                                    []uint64
	}
	cases := []struct {
		overrides string
		want      want
	}{
		// The recorded config: nothing differs.
		{"", want{reached: 6, envSteps: 13}},
		// Three children per expansion: one unobserved child at each of
		// A's and C's expansions; interval 1 is partial (A's third child
		// would have been active there).
		{"m=3", want{differ: 2, children: 2, unobserved: 2, reached: 6, envSteps: 13, partial: 1, diffNodes: []uint64{1, 3}}},
		// Delta 0.1 prunes D at interval 1 (0.6 < 0.8 − 0.1): its last 2
		// turns are not spent.
		{"delta=0.1", want{differ: 1, pruned: 1, reached: 6, envSteps: 11, diffNodes: []uint64{4}}},
		// Top 2 also expands D at interval 1: two unobserved children, D's
		// last 2 turns not spent.
		{"top=2", want{differ: 1, expanded: 1, unobserved: 2, reached: 6, envSteps: 11, diffNodes: []uint64{4}}},
		// Delta 0.7 keeps B: its continuation is unobserved, and interval 1
		// is partial.
		{"delta=0.7", want{differ: 1, survived: 1, unobserved: 1, reached: 6, envSteps: 13, partial: 1, diffNodes: []uint64{2}}},
		{"delta=1.5", want{differ: 1, survived: 1, unobserved: 1, reached: 6, envSteps: 13, partial: 1, diffNodes: []uint64{2}}},
		// No expansions: A survives (one unobserved continuation) and
		// nothing below it is reached; only A's and B's turns are spent.
		{"top=0", want{differ: 1, survived: 1, unobserved: 1, reached: 2, envSteps: 4, partial: 1, diffNodes: []uint64{1}}},
		// Width cap 2: at interval 1, C and D already fill it, so C
		// survives (rule width-cap) and E, F are not reached.
		{"max_active=2", want{differ: 1, survived: 1, unobserved: 1, reached: 4, envSteps: 10, diffNodes: []uint64{3}}},
	}
	for _, c := range cases {
		rep := whatIf(t, db, "hand", c.overrides)
		tot := rep.Totals
		got := want{differ: tot.Differ, pruned: tot.PrunedEarlier, expanded: tot.ExpandedInstead, survived: tot.SurvivedInstead,
			children: tot.Children, unobserved: tot.Unobserved, reached: tot.NodesReached, envSteps: tot.EnvSteps,
			partial: tot.PartialIntervals}
		for _, iv := range rep.Intervals {
			for _, d := range iv.Diffs {
				got.diffNodes = append(got.diffNodes, d.Node)
			}
		}
		if !equalWant(got.diffNodes, c.want.diffNodes) {
			t.Errorf("%q: differing nodes %v, want %v", c.overrides, got.diffNodes, c.want.diffNodes)
		}
		got.diffNodes, c.want.diffNodes = nil, nil
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got  %+v\n want %+v", c.overrides, got, c.want)
		}
		if tot.NodesRecorded != 6 || tot.EnvStepsRecorded != 13 || tot.Intervals != 2 {
			t.Errorf("%q: recorded %d nodes, %d env steps, %d intervals; want 6, 13, 2", c.overrides, tot.NodesRecorded, tot.EnvStepsRecorded, tot.Intervals)
		}
	}
	// The width-cap survivor carries the rule that explains it.
	rep := whatIf(t, db, "hand", "max_active=2")
	if d := rep.Intervals[1].Diffs[0]; d.WhatIf.Rule != tree.RuleWidthCap || d.Change != replay.SurvivedInstead || d.Recorded.Action != model.ActionExpand {
		t.Errorf("max_active=2: %+v", d)
	}
	if iv := rep.Intervals[1]; iv.Routed != 2 || iv.Recorded != 2 {
		t.Errorf("interval 1 routed %d of %d", iv.Routed, iv.Recorded)
	}
	rep = whatIf(t, db, "hand", "top=0")
	if iv := rep.Intervals[1]; iv.Routed != 0 || iv.Recorded != 2 || !iv.Partial {
		t.Errorf("top=0 interval 1: %+v; want nothing routed, 2 recorded, partial", iv)
	}
}

func equalWant(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseWhatIf(t *testing.T) {
	o, err := replay.ParseWhatIf(" delta=0.3, m=3 ,top=1,rule=median,max_active=8")
	if err != nil {
		t.Fatal(err)
	}
	if got := o.String(); got != "delta=0.3,m=3,top=1,rule=median,max_active=8" {
		t.Errorf("String() = %q", got)
	}
	cfg, err := o.Apply(tree.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Delta != 0.3 || cfg.M != 3 || cfg.TopExpand != 1 || cfg.PruneRule != tree.PruneMedian || cfg.MaxActive != 8 || cfg.K != 5 {
		t.Errorf("Apply = %+v", cfg)
	}
	if o, err := replay.ParseWhatIf(""); err != nil || !o.Empty() {
		t.Errorf("empty: %+v, %v", o, err)
	}
	for _, c := range []struct {
		in   string
		want error
	}{
		{"k=3", replay.ErrWhatIfKey},
		{"delta=0.3,seed=1", replay.ErrWhatIfKey},
		{"delta", replay.ErrWhatIfValue},
		{"=3", replay.ErrWhatIfValue},
		{"delta=abc", replay.ErrWhatIfValue},
		{"delta=NaN", replay.ErrWhatIfValue},
		{"m=2.5", replay.ErrWhatIfValue},
		{"rule=mean", replay.ErrWhatIfValue},
		{"m=2,m=3", replay.ErrWhatIfValue},
	} {
		if _, err := replay.ParseWhatIf(c.in); !errors.Is(err, c.want) {
			t.Errorf("ParseWhatIf(%q) = %v, want %v", c.in, err, c.want)
		}
	}
	// Range checks come from tree.Config.Validate, against the whole config.
	for _, in := range []string{"m=0", "delta=-1", "top=-1", "max_active=3"} {
		o, err := replay.ParseWhatIf(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if _, err := o.Apply(tree.DefaultConfig()); !errors.Is(err, replay.ErrWhatIfValue) || !errors.Is(err, tree.ErrInvalidConfig) {
			t.Errorf("Apply(%q) = %v, want ErrWhatIfValue and tree.ErrInvalidConfig", in, err)
		}
	}
}

// TestRecordedConfig: the base of a what-if is the tree config the run
// recorded, as every writer records it; a run whose config has no tree
// member, or one that does not parse, is analysed against the defaults and
// the report says the base was not recorded.
func TestRecordedConfig(t *testing.T) {
	cfg := tree.DefaultConfig()
	cfg.Delta, cfg.M = 0.25, 3
	for _, c := range []struct {
		conf string
		ok   bool
		want tree.Config
	}{
		{string(tree.ConfigJSON(cfg)), true, cfg},
		{`{"tree":` + mustJSON(t, cfg) + `,"lr":0.1}`, true, cfg},
		{`{"tree":{"Delta":0.25,"M":3}}`, true, cfg}, // missing members keep the defaults
		{`{"tree":{"delta":0.25,"m":3,"top_expand":2,"prune_rule":"max","other":1}}`, true, cfg},
		{`{"tree":{"delta":"wide"}}`, false, tree.DefaultConfig()},
		{``, false, tree.DefaultConfig()},
		{`not json`, false, tree.DefaultConfig()},
		{`{"lr":0.1}`, false, tree.DefaultConfig()},
		{`{"tree":"max"}`, false, tree.DefaultConfig()},
	} {
		db := storetest.Open(t)
		var rep *replay.WhatIfReport
		err := db.Update(func(tx *store.Tx) error {
			r, err := tx.CreateRun("r", []byte(c.conf), nil)
			if err != nil {
				return err
			}
			rep, err = replay.WhatIf(r, replay.WhatIfOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", c.conf, err)
		}
		if rep.BaseRecorded != c.ok || rep.Base != c.want {
			t.Errorf("config %s: base %+v recorded %v; want %+v, %v", c.conf, rep.Base, rep.BaseRecorded, c.want, c.ok)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWhatIfSelection(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("s")
	replaytest.BuildOneTx(t, db, spec)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		rep, err := replay.WhatIf(r, replay.WhatIfOptions{Step: 2})
		if err != nil {
			return err
		}
		if rep.Totals.Groups != spec.Groups {
			t.Errorf("step 2: %d groups, want %d", rep.Totals.Groups, spec.Groups)
		}
		for _, iv := range rep.Intervals {
			if iv.Step != 2 {
				t.Errorf("step filter leaked step %d", iv.Step)
			}
		}
		if _, err := replay.WhatIf(r, replay.WhatIfOptions{Step: 99}); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("unknown step: %v, want ErrNotFound", err)
		}
		base := tree.DefaultConfig()
		rep, err = replay.WhatIf(r, replay.WhatIfOptions{Base: &base})
		if err != nil || rep.BaseRecorded || rep.Base != base {
			t.Errorf("given base: %+v, %v", rep, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
