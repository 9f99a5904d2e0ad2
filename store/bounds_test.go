package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Run ids and steps outside their documented ranges are ErrInvalid
// naming the range, and the file is left as it was: "." and ".." (a
// path segment that names another place), a step past MaxStep (a
// checkpoint at 2^64-1 left the run no next step). The bounds are taken.
func TestOutOfRangeIdsAndStepsWriteNothing(t *testing.T) {
	path := tempPath(t, "b.db")
	db := storetest.OpenPath(t, path, syncOptions())
	update(t, db, func(tx *store.Tx) error { _, _, err := runWithRoot(tx); return err })
	for _, c := range []struct {
		name  string
		write func(*store.Tx) error
		says  string
	}{
		{"run id .", func(tx *store.Tx) error { _, err := tx.CreateRun(".", nil, nil); return err }, store.RunIDRule},
		{"run id ..", func(tx *store.Tx) error { _, err := tx.CreateRun("..", nil, nil); return err }, store.RunIDRule},
		{"group past MaxStep", func(tx *store.Tx) error {
			return inRunTx(tx, func(r *store.RunTx) error {
				_, err := r.OpenGroup(store.GroupSpec{Step: model.MaxStep + 1})
				return err
			})
		}, "steps run from 1 to"},
		{"checkpoint at 2^64-1", func(tx *store.Tx) error {
			return inRunTx(tx, func(r *store.RunTx) error {
				return r.PutCheckpoint(model.Checkpoint{Step: 1<<64 - 1, URI: "u"})
			})
		}, "steps run from 1 to"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := fileDigest(t, path)
			err := db.Update(c.write)
			if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v, want ErrInvalid saying %q", err, c.says)
			}
			if fileDigest(t, path) != before {
				t.Error("the refused write changed the file")
			}
		})
	}
	update(t, db, func(tx *store.Tx) error {
		if _, err := tx.CreateRun("...", nil, nil); err != nil {
			return err
		}
		return inRunTx(tx, func(r *store.RunTx) error {
			_, err := r.OpenGroup(store.GroupSpec{Step: model.MaxStep})
			return err
		})
	})
}

// inRunTx runs fn on run "r" of tx.
func inRunTx(tx *store.Tx, fn func(*store.RunTx) error) error {
	r, err := tx.Run("r")
	if err != nil {
		return err
	}
	return fn(r)
}
