package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// TestCheckProgress: a check reports each part of each run as it starts,
// with the totals the run's counters give, and finds the same as without a
// listener.
func TestCheckProgress(t *testing.T) {
	db := storetest.Open(t)
	buildFixture(t, db)
	var seen []store.CheckProgress
	vs, err := db.Check(&store.CheckOptions{Progress: func(p store.CheckProgress) { seen = append(seen, p) }})
	if err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	starts := map[string]store.CheckProgress{}
	var order []string
	for _, p := range seen {
		if p.Done == 0 {
			starts[p.Phase] = p
			order = append(order, p.Phase)
		}
	}
	want := []string{"pages", "groups", "nodes", "turns", "children", "advantages", "events", "log"}
	if len(order) != len(want) {
		t.Fatalf("phases %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("phases %v, want %v", order, want)
		}
	}
	for phase, total := range map[string]int64{"groups": 2, "nodes": 6, "turns": 9} {
		if p := starts[phase]; p.Total != total || p.Run != "r1" {
			t.Errorf("%s starts as %+v, want total %d of run r1", phase, p, total)
		}
	}
	var seq uint64
	inRun(t, db, false, "r1", func(r *store.RunTx) error { seq = r.LastSeq(); return nil })
	for _, phase := range []string{"events", "log"} {
		if p := starts[phase]; p.Total != int64(seq) {
			t.Errorf("%s starts as %+v, want total %d", phase, p, seq)
		}
	}
}

// A phase longer than the reporting interval (16384 records) reports its
// progress on the way: counts that grow, never past the phase's total.
func TestCheckProgressCountsUp(t *testing.T) {
	const turns = 1<<14 + 100
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		ts := make([]model.Turn, turns)
		for i := range ts {
			ts[i] = model.Turn{Action: "a", Observation: "o"}
		}
		return r.AppendTurns(n.ID, 0, ts...)
	})
	var reports []store.CheckProgress
	vs, err := db.Check(&store.CheckOptions{Progress: func(p store.CheckProgress) {
		if p.Phase == "turns" {
			reports = append(reports, p)
		}
	}})
	if err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	if len(reports) != 2 || reports[0].Done != 0 || reports[1].Done != 1<<14 {
		t.Fatalf("turns phase reported %+v, want its start and 16384 done", reports)
	}
	for _, p := range reports {
		if p.Total != turns || p.Run != "r" {
			t.Errorf("report %+v, want total %d of run r", p, turns)
		}
	}
}

// A check counts each record once: in a run with one more node and one
// more child entry than a report interval (16,384), nodes and children
// each report once with Done at the interval, and never past the nodes'
// total.
func TestCheckProgressCountsEachRecordOnce(t *testing.T) {
	const every = 1 << 14
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("big", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t"})
		if err != nil {
			return err
		}
		root, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		// 128 children a node, so that no sibling list grows long.
		ids := []uint64{root.ID}
		for i := range every + 1 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Parent: ids[i/128], Ordinal: i % 128})
			if err != nil {
				return err
			}
			ids = append(ids, n.ID)
		}
		return nil
	})
	reports := map[string][]store.CheckProgress{}
	vs, err := db.Check(&store.CheckOptions{Progress: func(p store.CheckProgress) {
		if p.Done > 0 {
			reports[p.Phase] = append(reports[p.Phase], p)
		}
	}})
	if err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	for _, phase := range []string{"nodes", "children"} {
		if got := reports[phase]; len(got) != 1 || got[0].Done != every {
			t.Errorf("%s: reports %+v, want one at %d", phase, got, every)
		}
	}
	for _, p := range reports["nodes"] {
		if p.Done > p.Total {
			t.Errorf("nodes: %d done of %d", p.Done, p.Total)
		}
	}
}
