package export_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/internal/replaytest"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The rl export holds, per step, the rows of the step's batch, the same in
// JSONL and Parquet, with rewards written as floats.
func TestExportRL(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("rl")
	replaytest.BuildOneTx(t, db, spec)
	out := filepath.Join(t.TempDir(), "lake")
	var done, units int64
	progress := func(d, tot int64) { done, units = d, tot }
	res, err := runExport(t, db, "rl", export.ExportOptions{Out: out, Format: export.RL, OnProgress: progress})
	if err != nil {
		t.Fatal(err)
	}
	// Progress counts the groups only: the RL rows carry no rubrics or
	// events, so the bar ends full.
	if units == 0 || done != units {
		t.Errorf("progress ended at %d of %d", done, units)
	}
	pq := readRunFiles[export.RLRow](t, out, "rl", "rl.parquet")
	if len(pq) != spec.Steps || res.Rows["rl.jsonl"] == 0 || res.Rows["rl.jsonl"] != res.Rows["rl.parquet"] {
		t.Fatalf("parquet steps %d, rows %v", len(pq), res.Rows)
	}
	total := 0
	for step := uint64(1); step <= uint64(spec.Steps); step++ {
		want, err := batchdb.ReadDB(db, "rl", step, batch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lines := readLines(t, filepath.Join(out, "run=rl", fmt.Sprintf("step=%d", step), "rl.jsonl"))
		rows := pq[fmt.Sprintf("step=%d", step)]
		if len(lines) != want.Len() || len(rows) != want.Len() {
			t.Fatalf("step %d: %d lines, %d parquet rows, batch has %d", step, len(lines), len(rows), want.Len())
		}
		for i, line := range lines {
			var js export.RLRow
			if err := json.Unmarshal([]byte(line), &js); err != nil {
				t.Fatal(err)
			}
			if reward := strings.SplitN(strings.SplitN(line, `"reward":`, 2)[1], ",", 2)[0]; !strings.ContainsAny(reward, ".e") {
				t.Errorf("step %d row %d: reward not written as a float: %s", step, i, line[:min(len(line), 200)])
			}
			lo, hi := want.RowOffsets[i], want.RowOffsets[i+1]
			for _, r := range []export.RLRow{js, rows[i]} {
				mask := make([]uint8, len(r.LossMask))
				for j, m := range r.LossMask {
					mask[j] = uint8(m)
				}
				if r.Leaf != uint64(want.RowLeaf[i]) || float64(r.Reward) != want.RowReward[i] || float64(r.Advantage) != want.RowAdvantage[i] ||
					!slices.Equal(r.InputIDs, want.InputIDs[lo:hi]) || !slices.Equal(mask, want.LossMask[lo:hi]) ||
					!slices.Equal(r.OldLogprobs, want.OldLogprobs[lo:hi]) || !slices.Equal(r.Advantages, want.Advantages[lo:hi]) ||
					!slices.Equal(r.Positions, want.Positions[lo:hi]) {
					t.Fatalf("step %d row %d (leaf %d) differs from the batch", step, i, want.RowLeaf[i])
				}
			}
			total++
		}
	}
	if int64(total) != res.Rows["rl.jsonl"] {
		t.Errorf("%d rows checked, export says %d", total, res.Rows["rl.jsonl"])
	}
}

// readRunFiles reads one file of every step folder of a run=/step= export
// back with parquet-go, by step folder.
func readRunFiles[T any](t *testing.T, out, run, name string) map[string][]T {
	t.Helper()
	return readSteps[T](t, filepath.Join(out, "run="+run, "step=*", name))
}

// A step whose closed groups give no row (every branch failed) has no RL
// files: an empty table is not written.
func TestExportRLSkipsAStepWithoutRows(t *testing.T) {
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, g, n, err := replaytest.OneNode(tx, "none")
		if err != nil {
			return err
		}
		if err := r.FailNode(n.ID, "env crashed"); err != nil {
			return err
		}
		return r.CloseGroup(1, g.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "lake")
	res, err := runExport(t, db, "none", export.ExportOptions{Out: out, Format: export.RL})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 0 || res.Rows["rl.jsonl"] != 0 {
		t.Errorf("a step without rows exported %+v", res)
	}
	if _, err := os.Stat(filepath.Join(out, "run=none", "step=1")); !os.IsNotExist(err) {
		t.Errorf("a step without rows has a folder: %v", err)
	}
}
