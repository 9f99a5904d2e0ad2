package tree_test

import (
	"errors"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// The count of leased branches over a damaged record of a leased branch
// (its node or its group) is ErrCorrupt, never a count that leaves the
// branch out or counts it on a record it could not read.
func TestLeasedOverADamagedRecordFails(t *testing.T) {
	for _, what := range []string{"node", "group"} {
		db := openUnchecked(t)
		c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
		groups := openStep(t, c, 1, tasks(1))
		ls := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1, Step: 1})
		if len(ls) != 1 {
			t.Fatalf("%d leases, want 1", len(ls))
		}
		if what == "node" {
			damageNode(t, db, "r", ls[0].Node)
		} else {
			damageGroup(t, db, "r", 1, groups[0].ID)
		}
		for _, step := range []uint64{1, 0} {
			err := db.View(func(tx *store.Tx) error { _, err := c.Leased(tx, step); return err })
			if !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("leased of step %d with the leased branch's %s record damaged: %v, want ErrCorrupt", step, what, err)
			}
		}
	}
}

// Leased counts the live leases of the step asked for (of every step for
// 0): not another step's, and not one whose TTL ran out.
func TestLeasedCountsTheStepsLiveLeases(t *testing.T) {
	db := storetest.Open(t)
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := coordinator(t, db, "r", tree.DefaultConfig(), &tree.CoordinatorOptions{LeaseTTL: time.Minute, Now: clk.now})
	openStep(t, c, 1, tasks(1))
	openStep(t, c, 2, tasks(1))
	if ls := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1, Step: 1}); len(ls) != 1 {
		t.Fatalf("%d leases, want 1", len(ls))
	}
	leased := func(step uint64) int {
		t.Helper()
		var n int
		if err := db.View(func(tx *store.Tx) (err error) { n, err = c.Leased(tx, step); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if l1, l2, all := leased(1), leased(2), leased(0); l1 != 1 || l2 != 0 || all != 1 {
		t.Errorf("one lease of step 1: leased %d, %d and %d of steps 1, 2 and all; want 1, 0, 1", l1, l2, all)
	}
	clk.add(time.Minute + time.Second)
	if l1 := leased(1); l1 != 0 {
		t.Errorf("the lease's TTL over: step 1 leased %d, want 0", l1)
	}
}
