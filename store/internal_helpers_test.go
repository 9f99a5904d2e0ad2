package store

import (
	"path/filepath"
	"testing"
)

// openWithGroup opens a fresh store and, in one write transaction,
// creates run "r", opens a group at step 1 and calls fn with them.
func openWithGroup(t *testing.T, fn func(r *RunTx, group uint64) error) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "t.patrdb"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(GroupSpec{Step: 1, Task: "t"})
		if err != nil {
			return err
		}
		return fn(r, g.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// inRunR runs fn on run "r" in a write or read transaction and fails the
// test on its error.
func inRunR(t *testing.T, db *DB, write bool, fn func(*RunTx) error) {
	t.Helper()
	do := func(tx *Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		return fn(r)
	}
	var err error
	if write {
		err = db.Update(do)
	} else {
		err = db.View(do)
	}
	if err != nil {
		t.Fatal(err)
	}
}
