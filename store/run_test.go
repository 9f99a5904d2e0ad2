package store_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// SetConfig is a write: refused as read-only in a read transaction.
func TestSetConfigInReadTx(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		if err := r.SetConfig([]byte(`{"b0": 4}`)); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("SetConfig in a read transaction: %v, want ErrReadOnly", err)
		}
		return nil
	})
}

// BucketSizes of a run written before the counters existed lists the
// buckets it has and skips the counters, rather than failing.
func TestBucketSizesWithoutCounters(t *testing.T) {
	db := openWithout(t, "counts")
	defer db.Close()
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		sizes, err := r.BucketSizes()
		if err != nil {
			t.Fatalf("BucketSizes without counters: %v", err)
		}
		var names []string
		for _, s := range sizes {
			names = append(names, s.Name)
		}
		if slices.Contains(names, "counts") || !slices.Contains(names, "groupids") || !slices.Contains(names, "nodes") {
			t.Errorf("buckets %v, want every bucket but counts", names)
		}
		return nil
	})
}
