//go:build linux

package export_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store/storetest"
)

// An rl export whose Parquet file stops taking writes (a full disk) fails
// at the group whose rows it could not write: it does not go on reading
// the rest of the run, so the progress never reaches the total.
func TestRLExportStopsAtAFailedWrite(t *testing.T) {
	db := storetest.Open(t)
	// The second group's rows fill a row group (1024 rows) and go on past
	// it by more than one batch of pending rows (256): the Parquet writer
	// then writes the full row group out while the group is exported.
	replaytest.FlatRun(t, db, "w", replaytest.FlatGroup{Step: 1, Leaves: 1, Tokens: 0}, replaytest.FlatGroup{Step: 1, Leaves: 1400, Tokens: 64}, replaytest.FlatGroup{Step: 1, Leaves: 1, Tokens: 0}, replaytest.FlatGroup{Step: 1, Leaves: 1, Tokens: 0})
	base := t.TempDir()
	var last, total int64
	full := -1
	_, err := runExport(t, db, "w", export.ExportOptions{Out: filepath.Join(base, "lake"), Format: export.RL, OnProgress: func(done, tot int64) {
		last, total = done, tot
		if full < 0 {
			full = redirect(t, base, "step=1/rl.parquet", "/dev/full")
		}
	}})
	if full < 0 {
		t.Fatal("no open rl.parquet after the first group")
	}
	if !errors.Is(err, syscall.ENOSPC) || last != 1 || total != 4 {
		t.Errorf("export onto a full disk: %v, progress %d of %d, want an error at 1 of 4", err, last, total)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Errorf("the failed export left %v", dirNames(ents))
	}
}
