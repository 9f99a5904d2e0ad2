package store_test

import (
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A backup is the file as one commit left it, taken while a writer goes
// on: it opens, checks clean and holds the run as it was then.
func TestBackupIsAConsistentCopyWhileWriting(t *testing.T) {
	db := storetest.Open(t)
	var rb uint64
	for s := uint64(1); s <= 3; s++ {
		rb = writeStep(t, db, "r", s, rb, 100)
	}
	want := dumpRun(t, db, "r")

	// The backup's reader stalls until a step is written beside it.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := db.Backup(pw, nil)
		pw.CloseWithError(err)
		done <- err
	}()
	first := make([]byte, 4096)
	if _, err := io.ReadFull(pr, first); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() { writeStep(t, db, "r", 4, rb, 100); close(wrote) }()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("a write waited for the backup")
	}
	path := tempPath(t, "backup.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(first); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, pr); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cp, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if vs, err := cp.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check of the backup: %v %v", err, vs)
	}
	if got := dumpRun(t, cp, "r"); !reflect.DeepEqual(got, want) {
		t.Error("the backup differs from the run as it stood when the backup began")
	}
}

// BackupFile writes a whole copy or nothing, and never over a file.
func TestBackupFileRefusesAnExistingFile(t *testing.T) {
	db := storetest.Open(t)
	writeStep(t, db, "r", 1, 0, 10)
	path := tempPath(t, "b.db")
	n, err := db.BackupFile(path)
	if err != nil || n == 0 {
		t.Fatalf("backup: %d %v", n, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != n {
		t.Fatalf("backup file: %v %v, want %d bytes", fi, err, n)
	}
	before := fileDigest(t, path)
	if _, err := db.BackupFile(path); !errors.Is(err, model.ErrExists) {
		t.Fatalf("backup over a file: %v, want ErrExists", err)
	}
	if fileDigest(t, path) != before {
		t.Error("a refused backup changed the file")
	}
}

// A compacted copy is as long as the pages it uses, never the growth
// step bbolt leaves past them: the copy of a file with free pages is
// smaller, and the copy of a packed file no larger.
func TestCompactIsNoLargerThanItsPages(t *testing.T) {
	path := tempPath(t, "src.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	var rb uint64
	for s := uint64(1); s <= 8; s++ {
		rb = writeStep(t, db, "r", s, rb, 8<<10)
	}
	dst := tempPath(t, "packed.db")
	if err := store.Compact(db, dst, nil); err != nil {
		t.Fatal(err)
	}
	again := tempPath(t, "again.db")
	cp, err := store.Open(dst, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := store.Compact(cp, again, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dst, again} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		var used int64
		_ = storetest.Bolt(cp).View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
		if fi.Size() > used {
			t.Errorf("%s is %d bytes, its pages %d", p, fi.Size(), used)
		}
	}
	src, _ := os.Stat(path)
	packed, _ := os.Stat(dst)
	if packed.Size() >= src.Size() {
		t.Errorf("the copy is %d bytes, the source %d", packed.Size(), src.Size())
	}
}
