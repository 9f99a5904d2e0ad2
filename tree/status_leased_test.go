package tree_test

import (
	"testing"
	"time"

	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// A step's status counts the branches out on lease, as a driver deciding
// whether to wait for workers reads it.
func TestStatusCountsLeases(t *testing.T) {
	db := storetest.Open(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	openStep(t, c, 1, tasks(2))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w1", Max: 3, Step: 1})
	if len(ls) != 3 {
		t.Fatalf("%d leases granted, want 3", len(ls))
	}
	var st rollout.StepStatus
	if err := db.View(func(tx *store.Tx) (err error) { st, err = c.Status(tx, 1); return err }); err != nil {
		t.Fatal(err)
	}
	if st.Leased != 3 || st.Groups != 2 || st.Active != 2*tree.DefaultConfig().B0 {
		t.Errorf("status with 3 leases out: %+v", st)
	}
}

// The count of leases out, read again and again in the same snapshot (idle
// workers polling the status), follows every change of the lease table
// and each lease's expiry, never a count read before.
func TestLeasedCountFollowsTheLeaseTable(t *testing.T) {
	db := storetest.Open(t)
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := coordinator(t, db, "r", tree.DefaultConfig(), &tree.CoordinatorOptions{LeaseTTL: time.Minute, Now: clk.now})
	openStep(t, c, 1, tasks(2))
	leased := func() int {
		t.Helper()
		var n int
		if err := db.View(func(tx *store.Tx) (err error) { n, err = c.Leased(tx, 1); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	check := func(what string, want int) {
		t.Helper()
		for range 2 { // the second read may come from the first's count
			if got := leased(); got != want {
				t.Fatalf("%s: %d leased, want %d", what, got, want)
			}
		}
	}
	check("before any grant", 0)
	ls := lease(t, c, tree.LeaseRequest{Worker: "w1", Max: 3, Step: 1, TTL: 10 * time.Second})
	check("after a grant of 3", 3)
	lease(t, c, tree.LeaseRequest{Worker: "w2", Max: 2, Step: 1, TTL: time.Minute})
	check("after a grant of 2 more", 5)
	c.Release("w1", []string{ls[0].ID})
	check("after a release", 4)
	clk.add(11 * time.Second)
	check("after w1's two leases ran out", 2)
	lease(t, c, tree.LeaseRequest{Worker: "w3", Max: 1, Step: 1})
	check("after a grant in the same snapshot", 3)
}
