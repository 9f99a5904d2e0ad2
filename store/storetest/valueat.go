package storetest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store"
)

// ValueAt is where the stored value of key in sub-bucket name of run lies
// in the closed file at path, for a test that damages that one record. It
// fails the test unless the value's bytes occur in the file exactly once.
func ValueAt(tb testing.TB, path, run, name string, key []byte) int {
	tb.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	var val []byte
	_ = db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte(name)); b != nil {
			val = bytes.Clone(b.Get(key))
		}
		return nil
	})
	_ = db.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if val == nil || bytes.Count(raw, val) != 1 {
		tb.Fatalf("runs/%s/%s key %x: value not in the file once", run, name, key)
	}
	return bytes.Index(raw, val)
}

// OpenDamaged opens, read-only, a copy of the closed file at src in which
// one bit of the value of key in run's sub-bucket name is flipped (past
// its codec header, so the record fails its checksum), or an undamaged
// copy when name is "". It is closed when the test ends.
func OpenDamaged(tb testing.TB, src, run, name string, key []byte) *store.DB {
	tb.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if name != "" {
		raw[ValueAt(tb, src, run, name, key)+6] ^= 0x10
	}
	path := filepath.Join(tb.TempDir(), "damaged.patrdb")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	o := Options()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
