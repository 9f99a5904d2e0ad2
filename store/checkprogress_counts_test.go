package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

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
