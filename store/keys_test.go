package store_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// A CorruptError outlives the transaction that found the damage: its key
// is a copy, not bytes of the file's read-only mapping (which it would be
// for a bucket too big to be stored inline).

func TestCorruptErrorKeyIsACopy(t *testing.T) {
	good := goodFile(t)
	db := storetest.OpenPath(t, good, syncOptions())
	f := readFixture(t, db)
	db.Close()
	damages := map[string]func(*bolt.Bucket, []byte){
		"CRC": func(b *bolt.Bucket, k []byte) {
			v := bytes.Clone(b.Get(k))
			v[len(v)-1] ^= 0x40
			mustPut(t, b, k, v)
		},
		"length": func(b *bolt.Bucket, k []byte) { mustPut(t, b, k, frame([]byte{0x96, 0xc6, 0xff, 0xff, 0xff, 0xff})) },
		"header": func(b *bolt.Bucket, k []byte) { mustPut(t, b, k, []byte{1, 2}) },
		"decode": func(b *bolt.Bucket, k []byte) { mustPut(t, b, k, frame([]byte{0xa1, 'x'})) },
	}
	for name, damage := range damages {
		path := filepath.Join(t.TempDir(), "d.db")
		copyFile(t, good, path)
		rawUpdate(t, path, func(tx *bolt.Tx) error {
			damage(runBucket(tx, "r1", "ckpt"), beKey(1))
			damage(runBucket(tx, "r1", "nodes"), beKey(f.B))
			damage(runBucket(tx, "r1", "events"), beKey(1))
			inflate(t, tx)
			return nil
		})
		ddb, err := store.Open(path, storetest.Options())
		if err != nil {
			t.Fatal(err)
		}
		var errs []error
		_ = ddb.ViewRun("r1", func(r *store.RunTx) error {
			var err error
			_, err = r.Node(f.B)
			errs = append(errs, err)
			_, err = r.Checkpoint(1)
			errs = append(errs, err)
			errs = append(errs, r.Events(0, func(model.Event) error { return nil }))
			return nil
		})
		for _, err := range errs {
			var ce *store.CorruptError
			if !errors.As(err, &ce) || len(ce.Key) != 8 {
				t.Fatalf("%s: %v, want a *CorruptError with the record's key", name, err)
			}
			for i := range ce.Key { // faults if the key is the mapping's
				ce.Key[i] ^= 0xff
				ce.Key[i] ^= 0xff
			}
		}
		ddb.Close()
	}
}

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
