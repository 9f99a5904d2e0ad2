package storetest

import (
	"bytes"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
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
