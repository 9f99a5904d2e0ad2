// Package storetest opens throwaway patrdb files for tests and checks them
// when the test ends.
package storetest

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
)

// Clock is a fixed clock that advances one millisecond per call, so files
// written in tests are reproducible.
func Clock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Millisecond)
		return t
	}
}

// Options returns test options: NoSync and a deterministic clock.
func Options() *store.Options {
	o := store.DefaultOptions()
	o.NoSync = true
	o.Clock = Clock()
	return o
}

// Open opens a new DB in t.TempDir(). At cleanup it runs the full Check and
// fails the test on any violation, then closes the DB.
func Open(tb testing.TB) *store.DB {
	tb.Helper()
	return OpenPath(tb, filepath.Join(tb.TempDir(), "patr.db"), Options())
}

// OpenPath opens path with opts and registers the same cleanup as Open.
func OpenPath(tb testing.TB, path string, opts *store.Options) *store.DB {
	tb.Helper()
	db, err := store.Open(path, opts)
	if err != nil {
		tb.Fatalf("storetest: open %s: %v", path, err)
	}
	tb.Cleanup(func() { MustCheckClose(tb, db) })
	return db
}

// MustCheckClose runs Check, reports every violation, and closes db. Safe to
// call on a DB that is already closed (it then reopens the file to check it).
func MustCheckClose(tb testing.TB, db *store.DB) {
	tb.Helper()
	vs, err := db.Check(nil)
	if err == store.ErrClosed {
		o := store.DefaultOptions()
		o.ReadOnly = true
		rdb, oerr := store.Open(db.Path(), o)
		if oerr != nil {
			tb.Errorf("storetest: reopen %s for check: %v", db.Path(), oerr)
			return
		}
		defer rdb.Close()
		vs, err = rdb.Check(nil)
	}
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		tb.Errorf("storetest: check: %v", err)
	}
	for _, v := range vs {
		tb.Errorf("storetest: check: %s", v)
	}
	_ = db.Close()
}
