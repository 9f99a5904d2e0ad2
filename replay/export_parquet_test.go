package replay_test

import (
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A step of a single row exports that row: the last rows of a table,
// however few, reach its Parquet file when it closes.
func TestExportParquetOneRow(t *testing.T) {
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("one", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "p", PromptTokens: []uint32{1, 2}})
		if err != nil {
			return err
		}
		n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
		if err != nil {
			return err
		}
		turn := model.Turn{Action: "a", ActionTokens: []uint32{3}, ActionLogprobs: []float32{-1}, Observation: "o", ObservationTokens: []uint32{4}, Done: true}
		for _, step := range []func() error{
			func() error { return r.AppendTurns(n.ID, 0, turn) },
			func() error { return r.SetReward(n.ID, 1) },
			func() error { return r.SetNodeStatus(n.ID, model.NodeCompleted) },
			func() error {
				return r.PutAdvantage(model.Advantage{Step: 1, Group: g.ID, Leaf: n.ID, Outcome: 1, Total: 1, Advantage: 0.5})
			},
			func() error { return r.CloseGroup(1, g.ID) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "lake")
	res, err := export(t, db, "one", replay.ExportOptions{Out: out, Format: replay.RL})
	if err != nil {
		t.Fatal(err)
	}
	rows := readRunFiles[replay.RLRow](t, out, "one", "rl.parquet")["step=1"]
	if len(rows) != 1 || res.Rows["rl.parquet"] != 1 || len(rows[0].InputIDs) != 4 {
		t.Fatalf("the parquet file holds %d rows (%+v), the export counts %v", len(rows), rows, res.Rows)
	}
}
