package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A checkpoint is a write: in a read transaction it is refused as
// read-only, before anything about the run is looked at.
func TestPutCheckpointInReadTx(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		if err := r.PutCheckpoint(model.Checkpoint{Step: fixtureStep + 1}); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("PutCheckpoint in a read transaction: %v, want ErrReadOnly", err)
		}
		return nil
	})
}
