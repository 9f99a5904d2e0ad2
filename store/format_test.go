package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// fileFormat reads the format version straight from the meta bucket.
func fileFormat(t *testing.T, path string) uint64 {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var v uint64
	if err := bdb.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket([]byte("meta")).Get([]byte("format")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// olderFormats are committed files of the formats before this one: the
// fuzz base as it was written before format 2, and a small run written by
// format 2 (policy versions, prompt tokens, a failed node's error, turns
// appended by two branches in turn and one rewritten).
var olderFormats = []struct {
	path   string
	format uint64
}{{"testdata/format1.db", 1}, {"testdata/format2.db", 2}}

// TestOlderFormatsReadOnly: an older file opens read-only and writable
// without a byte changing, reads back and checks clean, and refuses a
// write with ErrNeedsMigration, still without a byte changing.
func TestOlderFormatsReadOnly(t *testing.T) {
	for _, f := range olderFormats {
		t.Run(fmt.Sprint(f.format), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			copyFile(t, f.path, path)
			if got := fileFormat(t, path); got != f.format {
				t.Fatalf("fixture has format %d, want %d", got, f.format)
			}
			before := fileDigest(t, path)
			for _, ro := range []bool{true, false} {
				db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: time.Second})
				if err != nil {
					t.Fatalf("read-only %t: %v", ro, err)
				}
				vs, err := db.Check(nil)
				if err != nil && !errors.Is(err, store.ErrCorrupt) || len(vs) > 0 {
					t.Fatalf("read-only %t: check %v %v", ro, vs, err)
				}
				var run string
				view(t, db, func(tx *store.Tx) error {
					ids, err := tx.RunIDs()
					if err != nil || len(ids) == 0 {
						t.Fatalf("runs %v %v", ids, err)
					}
					run = ids[0]
					return nil
				})
				d := dumpRun(t, db, run)
				turns := 0
				for _, tr := range d.Traj {
					turns += len(tr)
				}
				if len(d.Nodes) == 0 || turns == 0 {
					t.Fatalf("read %d nodes and %d path turns", len(d.Nodes), turns)
				}
				if !ro {
					err := db.Update(func(tx *store.Tx) error {
						_, err := tx.CreateRun("new", nil, nil)
						return err
					})
					if !errors.Is(err, store.ErrNeedsMigration) {
						t.Errorf("a write to a format-%d file: %v, want ErrNeedsMigration", f.format, err)
					}
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				if fileDigest(t, path) != before {
					t.Fatalf("read-only %t: opening a format-%d file changed it", ro, f.format)
				}
			}
		})
	}
}

// TestMigrate: Migrate copies an older file into a new one of this format
// that reads back the same records, checks clean and takes writes; the
// source keeps its bytes.
func TestMigrate(t *testing.T) {
	for _, f := range olderFormats {
		t.Run(fmt.Sprint(f.format), func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "old.db"), filepath.Join(dir, "new.db")
			copyFile(t, f.path, src)
			before := fileDigest(t, src)
			res, err := store.Migrate(src, dst, syncOptions())
			if err != nil {
				t.Fatal(err)
			}
			if res.From != f.format || res.To != store.FormatVersion || res.Runs == 0 || res.Nodes == 0 || res.Turns == 0 {
				t.Errorf("result %+v", res)
			}
			if fileDigest(t, src) != before {
				t.Fatal("Migrate changed its source")
			}
			if got := fileFormat(t, dst); got != store.FormatVersion {
				t.Fatalf("the copy has format %d", got)
			}
			old := storetest.OpenPath(t, src, &store.Options{ReadOnly: true, Timeout: time.Second})
			db := storetest.OpenPath(t, dst, syncOptions())
			var runs []string
			view(t, old, func(tx *store.Tx) (err error) { runs, err = tx.RunIDs(); return err })
			for _, run := range runs {
				// The copy carries counters: its summary equals the
				// source's, counted without walking.
				var was, is model.RunSummary
				inRun(t, old, false, run, func(r *store.RunTx) (err error) { was, err = r.Summary(model.SummaryOptions{Steps: true}); return })
				inRun(t, db, false, run, func(r *store.RunTx) (err error) { is, err = r.Summary(model.SummaryOptions{Steps: true}); return })
				if !was.Walked || is.Walked {
					t.Errorf("run %s: walked before %v, after %v", run, was.Walked, is.Walked)
				}
				was.Walked = false
				if !reflect.DeepEqual(was, is) {
					t.Errorf("run %s: summary\n%+v\nafter migrating\n%+v", run, is, was)
				}
				want, got := dumpRun(t, old, run), dumpRun(t, db, run)
				for _, d := range []*runDump{&want, &got} {
					for i := range d.Nodes {
						d.Nodes[i].TurnRanges = nil
					}
					if len(d.Events) != len(want.Events) {
						t.Fatalf("run %s: %d events, want %d", run, len(got.Events), len(want.Events))
					}
					for i := range d.Events {
						d.Events[i].Payload = nil // node and turn payloads gained their ranges
					}
				}
				if !reflect.DeepEqual(want, got) {
					t.Errorf("run %s reads back differently after Migrate", run)
				}
			}
			if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
				t.Fatalf("check of the copy: %v %v", vs, err)
			}
			// The copy takes writes: turns for every active node.
			update(t, db, func(tx *store.Tx) error {
				r, err := tx.Run(runs[0])
				if err != nil {
					return err
				}
				ids, err := r.Frontier()
				if err != nil || len(ids) == 0 {
					t.Fatalf("frontier %v %v", ids, err)
				}
				for _, id := range ids {
					n, err := r.Node(id)
					if err != nil {
						return err
					}
					if err := r.AppendTurns(id, n.Turns, textTurns("m", 2)...); err != nil {
						return err
					}
				}
				return nil
			})
			if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
				t.Fatalf("check after writing to the copy: %v %v", vs, err)
			}
			if _, err := store.Migrate(src, dst, nil); !errors.Is(err, model.ErrExists) {
				t.Errorf("Migrate onto an existing file: %v, want ErrExists", err)
			}
			db.Close()
			other := filepath.Join(dir, "again.db")
			if _, err := store.Migrate(dst, other, nil); !errors.Is(err, model.ErrInvalid) {
				t.Errorf("Migrate of a current file: %v, want ErrInvalid", err)
			}
			if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused Migrate left %s: %v", other, err)
			}
		})
	}
}

// TestMigrateRefusesDamage: a source that does not decode is not copied,
// and no half-written destination is left behind.
func TestMigrateRefusesDamage(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "old.db"), filepath.Join(dir, "new.db")
	copyFile(t, "testdata/format1.db", src)
	bdb, err := bolt.Open(src, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		var nodes *bolt.Bucket
		_ = tx.Bucket([]byte("runs")).ForEachBucket(func(k []byte) error {
			nodes = tx.Bucket([]byte("runs")).Bucket(k).Bucket([]byte("nodes"))
			return nil
		})
		k, v := nodes.Cursor().First()
		v = append([]byte(nil), v...)
		v[len(v)-1] ^= 0x40
		return nodes.Put(k, v)
	}); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	if _, err := store.Migrate(src, dst, nil); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("Migrate of a damaged file: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed Migrate left %s: %v", dst, err)
	}
}

// A writer killed during its very first open can leave bbolt's four pages
// (16 KiB) without patrdb's meta bucket, or, killed before bbolt wrote
// them, a file of zero bytes. The writer takes either as new; a reader
// now does too (it had called them "not a patrdb file"): it lists no runs,
// finds none, checks clean, leaves the bytes as they were and nothing of
// its own behind, not even while it is open (where the system lets an
// open file be removed), so a reader killed while it reads leaves nothing
// either. A writer's open then makes it a patrdb file.
func TestAFileCutShortInItsFirstOpenReadsEmpty(t *testing.T) {
	for name, cut := range storetest.FirstOpensCutShort {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // where a reader's stand-in for a zero-byte file goes
			path := tempPath(t, "fresh.db")
			if err := cut(path); err != nil {
				t.Fatal(err)
			}
			if runtime.GOOS != "windows" {
				db := openReadOnly(t, path)
				if left, _ := os.ReadDir(tmp); len(left) != 0 {
					t.Errorf("an open reader keeps %v in the temporary folder", left)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
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
