package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A write transaction's Check sees the transaction's own writes, including
// node records still buffered for the commit: a node that just gained turns
// is consistent with them, not reported as stale.
func TestTxCheckSeesPendingNodeWrites(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		if err := r.AppendTurns(n.ID, 0, textTurns("p", 3)...); err != nil {
			return err
		}
		if vs, _ := tx.Check(nil); len(vs) != 0 {
			t.Errorf("Check inside the write that appended turns: %v, want no violations", vs)
		}
		return nil
	})
	var vs []store.Violation
	view(t, db, func(tx *store.Tx) error { vs, _ = tx.Check(nil); return nil })
	if len(vs) != 0 {
		t.Errorf("Check after the commit: %v, want no violations", vs)
	}
}
