package store_test

import (
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A damaged turn's CorruptError, like a record's, carries a copy of the
// key: the caller may keep and modify it after the transaction is gone.
func TestTurnCorruptErrorKeyIsACopy(t *testing.T) {
	good := goodFile(t)
	db := storetest.OpenPath(t, good, syncOptions())
	f := readFixture(t, db)
	key := turnKeyOf(t, db, "r1", f.X, 0)
	db.Close()
	path := filepath.Join(t.TempDir(), "d.db")
	copyFile(t, good, path)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		mustPut(t, runBucket(tx, "r1", "turns"), key, frame([]byte{0x98, 0xa1, 'x', 0xc6, 0, 0, 0, 3, 1, 2, 3}))
		inflate(t, tx)
		return nil
	})
	ddb, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer ddb.Close()
	var got error
	_ = ddb.ViewRun("r1", func(r *store.RunTx) error {
		_, got = r.Turns(f.X) // read through a cursor: its key is the mapping's
		return nil
	})
	var ce *store.CorruptError
	if !errors.As(got, &ce) || string(ce.Key) != string(key) {
		t.Fatalf("damaged turn: %v, want a *CorruptError with its key", got)
	}
	for i := range ce.Key { // faults if the key is the mapping's
		ce.Key[i] ^= 0xff
		ce.Key[i] ^= 0xff
	}
}
