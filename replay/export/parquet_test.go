package export_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A step of a single row exports that row: the last rows of a table,
// however few, reach its Parquet file when it closes.
func TestExportParquetOneRow(t *testing.T) {
	db := storetest.Open(t)
	oneLeafRun(t, db, "one", 1)
	out := filepath.Join(t.TempDir(), "lake")
	res, err := runExport(t, db, "one", export.ExportOptions{Out: out, Format: export.RL})
	if err != nil {
		t.Fatal(err)
	}
	rows := readRunFiles[export.RLRow](t, out, "one", "rl.parquet")["step=1"]
	if len(rows) != 1 || res.Rows["rl.parquet"] != 1 || len(rows[0].InputIDs) != 4 {
		t.Fatalf("the parquet file holds %d rows (%+v), the export counts %v", len(rows), rows, res.Rows)
	}
}

// oneLeafRun writes run id: one closed group at step, of one rewarded
// leaf of one turn (a prompt of two tokens, a turn of one action and one
// observation token) with its advantage.
func oneLeafRun(t *testing.T, db *store.DB, id string, step uint64) {
	t.Helper()
	replaytest.FlatRun(t, db, id, replaytest.FlatGroup{Step: step, Leaves: 1, Tokens: 0})
}

// The export writes only files it created: a step's file (of any table,
// in either format) that something else put into the export's temporary
// folder first fails the export (leaving nothing behind) rather than being
// written through.
func TestExportRefusesAFileItDidNotCreate(t *testing.T) {
	db := storetest.Open(t)
	replaytest.FlatRun(t, db, "x", replaytest.FlatGroup{Step: 1, Leaves: 1, Tokens: 0}, replaytest.FlatGroup{Step: 2, Leaves: 1, Tokens: 0})
	for _, c := range []struct {
		format export.Format
		name   string
	}{{export.RL, "rl.parquet"}, {export.RL, "rl.jsonl"}, {export.JSONL, "nodes.jsonl"}, {export.JSONL, "trajectories.jsonl"}} {
		name := c.name
		base := t.TempDir()
		planted := false
		_, err := runExport(t, db, "x", export.ExportOptions{Out: filepath.Join(base, "lake"), Format: c.format, OnProgress: func(done, total int64) {
			if planted {
				return
			}
			runs, _ := filepath.Glob(filepath.Join(base, ".lake.tmp-*", "run=x"))
			if len(runs) != 1 {
				t.Fatalf("the export's temporary run folder: %v", runs)
			}
			step2 := filepath.Join(runs[0], "step=2")
			if err := os.Mkdir(step2, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(step2, name), []byte("not ours"), 0o644); err != nil {
				t.Fatal(err)
			}
			planted = true
		}})
		if !errors.Is(err, fs.ErrExist) {
			t.Errorf("a step's %s planted in the export's folder: %v, want fs.ErrExist", name, err)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 0 {
			t.Errorf("%s planted: the failed export left %v", name, dirNames(ents))
		}
	}
}
