package store_test

import (
	"errors"
	"github.com/patrdb/patrdb/model"
	"os"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A writer killed during its very first open can leave bbolt's four pages
// (16 KiB) without patrdb's meta bucket, or, killed before bbolt wrote
// them, a file of zero bytes. The writer takes either as new; a reader
// now does too (it had called them "not a patrdb file"): it lists no runs,
// finds none, checks clean, leaves the bytes as they were and nothing of
// its own behind. A writer's open then makes it a patrdb file.
func TestAFileCutShortInItsFirstOpenReadsEmpty(t *testing.T) {
	for name, cut := range storetest.FirstOpensCutShort {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // where a reader's stand-in for a zero-byte file goes
			path := tempPath(t, "fresh.db")
			if err := cut(path); err != nil {
				t.Fatal(err)
			}
			readsEmpty(t, path)
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("the reader left %v behind", left)
			}
		})
	}
}

// readsEmpty holds the file at path, cut short in its first open, to
// reading as a new, empty patrdb file.
func readsEmpty(t *testing.T, path string) {
	before := fileDigest(t, path)
	db := openReadOnly(t, path)
	view(t, db, func(tx *store.Tx) error {
		if ids, err := tx.RunIDs(); err != nil || len(ids) != 0 {
			t.Errorf("RunIDs: %v, %v", ids, err)
		}
		if runs, err := tx.Runs(); err != nil || len(runs) != 0 {
			t.Errorf("Runs: %v, %v", runs, err)
		}
		if _, err := tx.Run("r"); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Run: %v, want ErrNotFound", err)
		}
		if _, err := checkedRun(tx, "r"); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("checked Run: %v, want ErrNotFound", err)
		}
		for name, parts := range map[string]store.CheckParts{"summary": store.CheckSummary | store.CheckLastEvent, "pages": store.CheckPages} {
			if err := walk(tx, "r", parts); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if err := walk(tx, "", store.CheckRunList); err != nil {
			t.Errorf("VerifyRuns: %v", err)
		}
		return nil
	})
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Errorf("Check: %v, %v", vs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fileDigest(t, path) != before {
		t.Fatal("reading the file changed it")
	}
	wdb := storetest.OpenPath(t, path, storetest.Options())
	update(t, wdb, func(tx *store.Tx) error { _, _, err := runWithRoot(tx); return err })
	if err := wdb.Close(); err != nil {
		t.Fatal(err)
	}
	db = openReadOnly(t, path)
	defer db.Close()
	view(t, db, func(tx *store.Tx) error {
		if ids, err := tx.RunIDs(); err != nil || len(ids) != 1 {
			t.Errorf("after a writer's open: RunIDs %v, %v", ids, err)
		}
		return nil
	})
}
