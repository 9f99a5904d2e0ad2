package store_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/patrdb/patrdb/store"
)

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
