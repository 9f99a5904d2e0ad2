package replay_test

// What-if configs that expand into fewer children than the run did (M
// smaller, or a width cap that shrinks an expansion), on a tree whose
// children were added out of ordinal order and with a branch that was
// scored but never routed.

import (
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// shrinkTree writes one group, 2 turns per interval, only interval 0
// scored:
//
//	A=1 (0.9) expands into 3 children added as ordinals 2, 0, 1:
//	  4 (ordinal 2, 1 turn), 5 (ordinal 0, 2 turns), 6 (ordinal 1, 3 turns)
//	B=2 (0.5) survives, runs 2 more turns (4 in all)
//	U=3 (0.7) is scored but has no decision (the run stopped routing it),
//	  and runs 2 more turns (4 in all)
//
// Recorded config: B0 3, M 3, top 1, delta 0.5, max; turns 2+4+4+1+2+3 = 16.
func shrinkTree(t *testing.T) *store.DB {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.M, cfg.TopExpand, cfg.Delta = 3, 3, 1, 0.5
	turns := func(n int) []model.Turn {
		out := make([]model.Turn, n)
		for i := range out {
			out[i] = model.Turn{Action: "a", ActionTokens: []uint32{1}, Observation: "o"}
		}
		return out
	}
	return handRun(t, "shrink", cfg, func(r *store.RunTx, g model.Group, must func(error)) {
		add := func(parent uint64, fork, ord, nturns int) uint64 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ord})
			must(err)
			must(r.AppendTurns(n.ID, 0, turns(nturns)...))
			return n.ID
		}
		a, b, u := add(0, 0, 0, 2), add(0, 0, 1, 2), add(0, 0, 2, 2)
		must(r.Score(a, model.Score{Interval: 0, Turn: 2, Value: 0.9}))
		must(r.Route(a, model.Decision{Interval: 0, Action: model.ActionExpand, Score: 0.9, Reference: 0.9, Delta: 0.5, Rule: tree.RuleTop, Children: 3}))
		must(r.Score(b, model.Score{Interval: 0, Turn: 2, Value: 0.5}))
		must(r.Route(b, model.Decision{Interval: 0, Action: model.ActionSurvive, Score: 0.5, Reference: 0.9, Delta: 0.5, Rule: tree.RuleSurvive}))
		must(r.Score(u, model.Score{Interval: 0, Turn: 2, Value: 0.7}))
		add(a, 2, 2, 1)
		add(a, 2, 0, 2)
		add(a, 2, 1, 3)
		must(r.AppendTurns(b, 2, turns(2)...))
		must(r.AppendTurns(u, 2, turns(2)...))
	})
}

func TestWhatIfFewerChildren(t *testing.T) {
	db := shrinkTree(t)
	type want struct {
		differ, pruned, survived, children int
		unobserved, reached, envSteps      int
		diffNodes                          []uint64
		children1                          int // A's what-if children
	}
	cases := []struct {
		overrides string
		want      want
	}{
		{"", want{reached: 6, envSteps: 16, children1: 3}},
		// One child: the one with ordinal 0 (node 5, 2 turns), not the
		// first by id (node 4, 1 turn).
		{"m=1", want{differ: 1, children: 1, reached: 4, envSteps: 2 + 4 + 4 + 2, diffNodes: []uint64{1}, children1: 1}},
		// A, B and U survive routing, so a cap of 4 leaves room for one
		// more: A expands into 2, ordinals 0 and 1 (nodes 5 and 6).
		{"max_active=4", want{differ: 1, children: 1, reached: 5, envSteps: 2 + 4 + 4 + 2 + 3, diffNodes: []uint64{1}, children1: 2}},
		// A cap of 3 leaves no room: A survives (width cap), its
		// continuation unobserved, none of its children reached.
		{"max_active=3", want{differ: 1, survived: 1, unobserved: 1, reached: 3, envSteps: 2 + 4 + 4, diffNodes: []uint64{1}}},
		// Two children where the run had three, and a larger M: counted
		// from the recorded children, never negative.
		{"m=2", want{differ: 1, children: 1, reached: 5, envSteps: 2 + 4 + 4 + 2 + 3, diffNodes: []uint64{1}, children1: 2}},
		{"m=4", want{differ: 1, children: 1, unobserved: 1, reached: 6, envSteps: 16, diffNodes: []uint64{1}, children1: 4}},
		// Delta 0.1 prunes B and the unrouted U (0.5 and 0.7 < 0.9 − 0.1)
		// at the turn they were scored at: 2 turns each are not spent.
		{"delta=0.1", want{differ: 2, pruned: 2, reached: 6, envSteps: 16 - 2 - 2, diffNodes: []uint64{2, 3}, children1: 3}},
	}
	for _, c := range cases {
		rep := whatIf(t, db, "shrink", c.overrides)
		tot := rep.Totals
		got := want{differ: tot.Differ, pruned: tot.PrunedEarlier, survived: tot.SurvivedInstead, children: tot.Children,
			unobserved: tot.Unobserved, reached: tot.NodesReached, envSteps: tot.EnvSteps}
		if len(rep.Intervals) != 1 {
			t.Fatalf("%q: %d intervals, want 1", c.overrides, len(rep.Intervals))
		}
		iv := rep.Intervals[0]
		if iv.Recorded != 3 || iv.Routed != 3 || iv.Partial || iv.Unobserved != tot.Unobserved {
			t.Errorf("%q: interval %+v", c.overrides, iv)
		}
		for _, d := range iv.Diffs {
			got.diffNodes = append(got.diffNodes, d.Node)
			if d.Unobserved < 0 {
				t.Errorf("%q: node %d has %d unobserved branches", c.overrides, d.Node, d.Unobserved)
			}
			if d.Node == 1 && d.Change == replay.Children && (d.Recorded.Children != 3 || d.WhatIf.Action != model.ActionExpand) {
				t.Errorf("%q: A's diff %+v", c.overrides, d)
			}
		}
		if !equalWant(got.diffNodes, c.want.diffNodes) {
			t.Errorf("%q: differing nodes %v, want %v", c.overrides, got.diffNodes, c.want.diffNodes)
		}
		got.diffNodes, c.want.diffNodes = nil, nil
		got.children1 = c.want.children1
		for _, d := range iv.Diffs {
			if d.Node == 1 {
				got.children1 = d.WhatIf.Children
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got  %+v\n want %+v", c.overrides, got, c.want)
		}
		if diffIntervals := min(len(iv.Diffs), 1); tot.Intervals != 1 || tot.DiffIntervals != diffIntervals || tot.PartialIntervals != 0 {
			t.Errorf("%q: %d intervals, %d with differences, %d partial; want 1, %d, 0", c.overrides, tot.Intervals, tot.DiffIntervals, tot.PartialIntervals, diffIntervals)
		}
		if tot.NodesRecorded != 6 || tot.EnvStepsRecorded != 16 || tot.Decisions != 3 {
			t.Errorf("%q: recorded %d nodes, %d env steps, %d decisions; want 6, 16, 3", c.overrides, tot.NodesRecorded, tot.EnvStepsRecorded, tot.Decisions)
		}
	}
}
