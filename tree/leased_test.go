package tree_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
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
