package tree_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// Abandoning a step whose groups partly closed already — the usual case:
// most finished, a few are stuck — gives up the open ones only: the
// closed group and its nodes stay as they were.
func TestAbandonLeavesClosedGroupsAlone(t *testing.T) {
	db := storetest.Open(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	groups := openStep(t, c, 1, tasks(2))
	closed := groups[0]
	if err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for _, id := range closed.Roots {
			if err := r.FailNode(id, "env crashed"); err != nil {
				return err
			}
		}
		return r.CloseGroup(1, closed.ID)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *store.Tx) error { return c.Abandon(tx, 1, "stuck") }); err != nil {
		t.Fatalf("abandoning a step with a closed group: %v", err)
	}
	for _, n := range dumpRun(t, db, "r").Nodes {
		want := "abandoned: stuck"
		if n.Group == closed.ID {
			want = "env crashed"
		}
		if n.Status != model.NodeFailed || n.Error != want {
			t.Errorf("node %d of group %d: %s %q, want failed %q", n.ID, n.Group, n.Status, n.Error, want)
		}
	}
}
