package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A writable transaction cannot read in checked mode: its changed pages
// are in memory, not in the file the page walks read. CheckReads says so
// with ErrInvalid and leaves the transaction as it was, so the write goes
// on and commits.
func TestCheckReadsRefusesAWritableTransaction(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		if err := tx.CheckReads(); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("CheckReads in Update: %v, want ErrInvalid", err)
		}
		_, err := tx.CreateRun("r", nil, nil)
		return err
	})
	if err := db.View(func(tx *store.Tx) error { _, err := tx.Run("r"); return err }); err != nil {
		t.Fatalf("the write after the refused CheckReads: %v", err)
	}
}
