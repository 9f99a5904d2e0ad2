package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// ViewTurns takes its segments from the caller: one naming a node the run
// does not have is ErrNotFound, not a crash or an empty view.
func TestViewTurnsOfUnknownNode(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		vs, err := r.ViewTurns([]model.Segment{{Node: f.X, Count: 1}, {Node: 31337, Count: 1}})
		if !errors.Is(err, model.ErrNotFound) || vs != nil {
			t.Errorf("ViewTurns with an unknown node: %d views, %v; want ErrNotFound", len(vs), err)
		}
		return nil
	})
}
