package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// An event payload msgpack cannot encode is the caller's mistake: refused
// as invalid, with no sequence number, and nothing appended.
func TestAppendEventRefusesUnencodablePayload(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		_, _, err := runWithRoot(tx)
		return err
	})
	before := dumpRun(t, db, "r").LastSeq
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		seq, err := r.AppendEvent("note", 1, 0, 0, 0, make(chan int))
		if seq != 0 || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AppendEvent with a channel payload: %d, %v; want 0, ErrInvalid", seq, err)
		}
		return err
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("the write: %v, want ErrInvalid", err)
	}
	if after := dumpRun(t, db, "r").LastSeq; after != before {
		t.Errorf("events went from %d to %d", before, after)
	}
}
