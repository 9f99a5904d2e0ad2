package store_test

import (
	"testing"

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
