package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func deleteRunBucket(tx *store.Tx, name string) error {
	return storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r1")).DeleteBucket([]byte(name))
}

// openWithout opens a copy of the fixture file whose run r1 lost one of its
// buckets; the caller closes it.
func openWithout(t *testing.T, gone string) *store.DB {
	t.Helper()
	path := tempPath(t, "damaged.db")
	copyFile(t, goodFile(t), path)
	db, err := store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *store.Tx) error { return deleteRunBucket(tx, gone) })
	return db
}

// A run missing its counters or its group index (one lost, or a file from
// before they existed) has both rebuilt from the records by its next
// write, and the file checks clean afterwards; a damaged node met while
// rebuilding refuses the write as corrupt.
func TestCountersRebuiltOnWrite(t *testing.T) {
	for _, gone := range []string{"counts", "groupids"} {
		db := openWithout(t, gone)
		update(t, db, func(tx *store.Tx) error {
			r, err := tx.Run("r1")
			if err != nil {
				return err
			}
			_, err = r.OpenGroup(store.GroupSpec{Step: fixtureStep})
			return err
		})
		vs, err := db.Check(nil)
		if cerr := db.Close(); (err != nil && !errors.Is(err, store.ErrCorrupt)) || cerr != nil {
			t.Fatal(err, cerr)
		}
		if len(vs) != 0 {
			t.Errorf("without %s, after a write: %v, want a clean file", gone, vs)
		}
	}
}

func TestCountersRebuildRefusesDamagedNode(t *testing.T) {
	db := openWithout(t, "counts")
	defer db.Close()
	err := db.Update(func(tx *store.Tx) error {
		nodes := rawBucket(t, tx, "r1", "nodes")
		k, _ := nodes.Cursor().First()
		if err := nodes.Put(append([]byte(nil), k...), []byte{0x01, 0, 0, 0, 0, 0x90}); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.OpenGroup(store.GroupSpec{Step: fixtureStep})
		return err
	})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("a write rebuilding counters over a damaged node: %v, want ErrCorrupt", err)
	}
}
