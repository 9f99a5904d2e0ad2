package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// twoRuns writes the fixture run r1 and a small run r2 beside it, closes
// the file and returns its bytes.
func twoRuns(t *testing.T) (path string, raw []byte) {
	t.Helper()
	path = tempPath(t, "two.db")
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	buildFixture(t, db)
	update(t, db, func(tx *store.Tx) error { _, _, err := runWithRoot(tx); return err })
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if raw, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	return path, raw
}

// A bucket header that says root 0 with no inline page after it — the
// run's own, or one of its sub-buckets' — is that run's damage: the runs
// still list, the other run reads, and everything that opens the damaged
// run (a plain Tx.Run included, where bbolt indexed past the header and
// panicked) answers ErrCorrupt naming the bucket, never reading past it.
func TestADamagedHeaderIsThatRunsDamage(t *testing.T) {
	path, raw := twoRuns(t)
	for _, bucket := range []string{"runs/r1", "runs/r1/events"} {
		t.Run(bucket, func(t *testing.T) {
			b := append([]byte(nil), raw...)
			at := storetest.HeaderAt(t, path, bucket)
			binary.NativeEndian.PutUint64(b[at:], 0)
			dpath := tempPath(t, "d.db")
			if err := os.WriteFile(dpath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			db := openReadOnly(t, dpath)
			defer db.Close()
			view(t, db, func(tx *store.Tx) error {
				if err := walk(tx, "", store.CheckRunList); err != nil {
					t.Errorf("VerifyRuns: %v, want nil: listing the runs opens none", err)
				}
				if ids, err := tx.RunIDs(); err != nil || strings.Join(ids, ",") != "r,r1" {
					t.Errorf("RunIDs: %v, %v", ids, err)
				}
				for name, parts := range map[string]store.CheckParts{"summary": store.CheckSummary | store.CheckLastEvent, "pages": store.CheckPages} {
					err := walk(tx, "r1", parts)
					var ce *store.CorruptError
					if !errors.As(err, &ce) || ce.Bucket != bucket || !strings.Contains(ce.Reason, "inline bucket page is damaged") {
						t.Errorf("%s(r1): %v, want a CorruptError in %s", name, err, bucket)
					}
					if err := walk(tx, "r", parts); err != nil {
						t.Errorf("%s(r): %v", name, err)
					}
				}
				if _, err := checkedRun(tx, "r1"); !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("checked Run(r1): %v, want ErrCorrupt", err)
				}
				var ce *store.CorruptError
				if _, err := tx.Run("r1"); !errors.As(err, &ce) || ce.Bucket != bucket {
					t.Errorf("Run(r1): %v, want a CorruptError in %s", err, bucket)
				}
				r, err := tx.Run("r")
				if err != nil {
					t.Fatalf("Run(r): %v", err)
				}
				if s, err := r.Summary(model.SummaryOptions{}); err != nil || s.Nodes != 1 {
					t.Errorf("r's summary: %+v, %v", s, err)
				}
				return nil
			})
		})
	}
}

// A copy whose context is done stops with the context's error and leaves
// no file at its destination: Compact (CompactOptions.Context) and
// MigrateContext, so a command that catches a stop signal ends at once
// instead of copying on into a file nobody will keep.
func TestCopiesStopWhenTheirContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path, _ := twoRuns(t)
	src := openReadOnly(t, path)
	defer src.Close()
	dst := tempPath(t, "c.db")
	if err := store.Compact(src, dst, &store.CompactOptions{Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Errorf("Compact: %v, want context.Canceled", err)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Compact left %s: %v", dst, err)
	}
	old := tempPath(t, "old.db")
	copyFile(t, "testdata/format1.db", old)
	dst = tempPath(t, "m.db")
	if _, err := store.MigrateContext(ctx, old, dst, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("MigrateContext: %v, want context.Canceled", err)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("MigrateContext left %s: %v", dst, err)
	}
}
