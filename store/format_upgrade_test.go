package store_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// TestFormat3UpgradesOnFirstWrite: a format-3 file (written before runs
// carried a policy version) opens read-only and writable without a byte
// changing and reads its runs at version 0; its first write transaction
// moves it to the current format in place, the write and the upgrade
// together; it then checks clean and reads back everything it held.
func TestFormat3UpgradesOnFirstWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	copyFile(t, "testdata/format3.db", path)
	if got := fileFormat(t, path); got != 3 {
		t.Fatalf("fixture has format %d, want 3", got)
	}
	before := fileDigest(t, path)
	var run string
	var dump runDump
	for _, ro := range []bool{true, false} {
		db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		view(t, db, func(tx *store.Tx) error {
			ids, err := tx.RunIDs()
			if err != nil || len(ids) == 0 {
				t.Fatalf("runs %v %v", ids, err)
			}
			run = ids[0]
			r, err := tx.Run(run)
			if err != nil {
				return err
			}
			info, err := r.Info()
			if err != nil || info.PolicyVersion != 0 {
				t.Fatalf("run %q of a format-3 file: version %d, %v", run, info.PolicyVersion, err)
			}
			return nil
		})
		dump = dumpRun(t, db, run)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if fileDigest(t, path) != before {
			t.Fatalf("read-only %t: opening a format-3 file changed it", ro)
		}
	}

	db, err := store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	refused := db.UpdateRun(run, func(r *store.RunTx) error {
		return r.PublishVersion(0) // versions only go forward: refused, nothing written
	})
	if !errors.Is(refused, model.ErrInvalid) {
		t.Fatalf("publishing version 0: %v, want ErrInvalid", refused)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fileDigest(t, path) != before {
		t.Fatal("a refused write changed the file")
	}
	if db, err = store.Open(path, syncOptions()); err != nil {
		t.Fatal(err)
	}
	if err := db.UpdateRun(run, func(r *store.RunTx) error {
		return r.PublishVersion(5)
	}); err != nil {
		t.Fatal(err)
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check after the upgrade: %v %v", vs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fileFormat(t, path); got != store.FormatVersion {
		t.Fatalf("after its first write the file has format %d, want %d", got, store.FormatVersion)
	}
	db, err = store.Open(path, &store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	after := dumpRun(t, db, run)
	if after.Info.PolicyVersion != 5 || len(after.Events) != len(dump.Events)+1 || after.Events[len(dump.Events)].Kind != model.EvRunVersion {
		t.Fatalf("after reopening: version %d, %d events (was %d)", after.Info.PolicyVersion, len(after.Events), len(dump.Events))
	}
	after.Info.PolicyVersion, after.Info.UpdatedAt = 0, dump.Info.UpdatedAt
	after.Events, after.LastSeq = after.Events[:len(dump.Events)], dump.LastSeq
	if !reflect.DeepEqual(dump, after) {
		t.Fatal("the upgraded file reads back other records than it held")
	}
}
