//go:build !windows

package replay_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofrs/flock"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Two runs under one id exported into one lake at once: one lands, the
// other is refused as a conflict — never the second silently replacing
// the first's partitions.
func TestLakeConcurrentExportsConflict(t *testing.T) {
	first, second := storetest.Open(t), storetest.Open(t)
	a := smallSpec("x")
	buildOneTx(t, first, a)
	b := a
	b.seed = 2
	buildOneTx(t, second, b)

	for round := 0; round < 4; round++ {
		lake := filepath.Join(t.TempDir(), "lake")
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, db := range []*store.DB{first, second} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = exportCtx(context.Background(), db, "x", replay.ExportOptions{Out: lake, Format: replay.Parquet})
			}()
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won == -1:
				won = i
			case errors.Is(err, replay.ErrLakeConflict):
			default:
				t.Fatalf("round %d: exports ended %v and %v; want one success and one ErrLakeConflict", round, errs[0], errs[1])
			}
		}
		if won == -1 {
			t.Fatalf("round %d: both exports refused: %v", round, errs)
		}
		// The lake is the winner's, whole.
		alone := filepath.Join(t.TempDir(), "alone")
		if _, err := exportCtx(context.Background(), []*store.DB{first, second}[won], "x", replay.ExportOptions{Out: alone, Format: replay.Parquet}); err != nil {
			t.Fatal(err)
		}
		if got, want := treeOf(t, lake), treeOf(t, alone); !equalTrees(got, want) {
			t.Fatalf("round %d: the lake mixes the two runs:\n got  %v\n want %v", round, keys(got), keys(want))
		}
	}
}

// An export waits while another holds the lake, gives up when its context
// ends with the lake untouched, and goes through once the lake is free.
func TestLakeExportWaitsForTheLock(t *testing.T) {
	db := storetest.Open(t)
	spec := smallSpec("w")
	buildOneTx(t, db, spec)
	lake := filepath.Join(t.TempDir(), "lake")
	if err := os.Mkdir(lake, 0o755); err != nil {
		t.Fatal(err)
	}
	other := flock.New(lake, flock.SetFlag(os.O_RDONLY))
	if ok, err := other.TryLock(); err != nil || !ok {
		t.Fatalf("lock the lake: %v %v", ok, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := exportCtx(ctx, db, spec.id, replay.ExportOptions{Out: lake, Format: replay.Parquet})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another export") {
		t.Fatalf("export into a held lake: %v, want it to wait and end with its context", err)
	}
	if got := treeOf(t, lake); len(got) != 1 { // "." only
		t.Fatalf("an export that never got the lake changed it: %v", keys(got))
	}
	if err := other.Unlock(); err != nil {
		t.Fatal(err)
	}
	res, err := exportCtx(context.Background(), db, spec.id, replay.ExportOptions{Out: lake, Format: replay.Parquet})
	if err != nil || len(res.Files) == 0 {
		t.Fatalf("export after the lake was freed: %v", err)
	}
}

// The working folder of a killed export is removed by the next export;
// one whose export still runs (its folder locked) is left alone.
func TestLakeSweepsKilledExports(t *testing.T) {
	db := storetest.Open(t)
	spec := smallSpec("s")
	buildOneTx(t, db, spec)
	lake := filepath.Join(t.TempDir(), "lake")
	killed := filepath.Join(lake, ".export-killed")
	running := filepath.Join(lake, ".export-running")
	for _, d := range []string{killed, running} {
		if err := os.MkdirAll(filepath.Join(d, "nodes"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "nodes", "part-0.parquet"), []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	held := flock.New(running, flock.SetFlag(os.O_RDONLY))
	if ok, err := held.TryLock(); err != nil || !ok {
		t.Fatalf("lock %s: %v %v", running, ok, err)
	}
	defer held.Unlock()
	if _, err := exportCtx(context.Background(), db, spec.id, replay.ExportOptions{Out: lake, Format: replay.Parquet}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(killed); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed export's folder is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(running, "nodes", "part-0.parquet")); err != nil {
		t.Errorf("a running export's folder was touched: %v", err)
	}
}
