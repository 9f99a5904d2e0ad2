package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// A run that lost its groups bucket answers a group lookup with
// ErrCorrupt, in a read and in a write transaction (where groups are kept
// per transaction), rather than crashing or saying the group is absent.
func TestGroupLookupWithoutGroupsBucket(t *testing.T) {
	db := openWithout(t, "groups")
	defer db.Close()
	for _, write := range []bool{false, true} {
		do := db.View
		if write {
			do = db.Update
		}
		err := do(func(tx *store.Tx) error {
			r, err := tx.Run("r1")
			if err != nil {
				return err
			}
			_, err = r.GroupAt(fixtureStep, 1)
			return err
		})
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("write %v: GroupAt without the groups bucket: %v, want ErrCorrupt", write, err)
		}
	}
}
