package tree_test

import (
	"testing"

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
