package export_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A node's reward in the JSONL export is null until the node has one, and
// then the stored value: a missing reward must not read as a reward of 0.
func TestExportJSONLRewardNullUntilSet(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("rw")
	replaytest.BuildOneTx(t, db, spec)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := runExport(t, db, spec.ID, export.ExportOptions{Out: out, Format: export.JSONL}); err != nil {
		t.Fatal(err)
	}
	nodes := map[uint64]model.Node{}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		for step := uint64(1); step <= uint64(spec.Steps); step++ {
			gs, err := r.Groups(step)
			if err != nil {
				return err
			}
			for _, g := range gs {
				ns, err := r.GroupNodes(g)
				if err != nil {
					return err
				}
				for _, n := range ns {
					nodes[n.ID] = n
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	with, without := 0, 0
	files, _ := filepath.Glob(filepath.Join(out, "run="+spec.ID, "step=*", "nodes.jsonl"))
	for _, f := range files {
		for _, l := range readLines(t, f) {
			var line struct {
				Node   uint64           `json:"node"`
				Reward *json.RawMessage `json:"reward"`
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			n, ok := nodes[line.Node]
			if !ok {
				t.Fatalf("%s: node %d is not in the store", f, line.Node)
			}
			var got *float64
			if line.Reward != nil {
				if err := json.Unmarshal(*line.Reward, &got); err != nil {
					t.Fatal(err)
				}
			}
			switch {
			case !n.HasReward && got != nil:
				t.Errorf("node %d has no reward, exported %v", n.ID, *got)
			case n.HasReward && (got == nil || *got != n.Reward):
				t.Errorf("node %d has reward %v, exported %v", n.ID, n.Reward, got)
			}
			if n.HasReward {
				with++
			} else {
				without++
			}
		}
	}
	if with == 0 || without == 0 {
		t.Fatalf("%d nodes with a reward, %d without: the fixture should have both", with, without)
	}
}
