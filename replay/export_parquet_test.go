package replay_test

import (
	"errors"
	"io/fs"
	"os"
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
	oneLeafRun(t, db, "one", 1)
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

// oneLeafRun writes run id: one closed group at step, of one rewarded
// leaf of one turn (a prompt of two tokens, a turn of one action and one
// observation token) with its advantage.
func oneLeafRun(t *testing.T, db *store.DB, id string, step uint64) {
	t.Helper()
	flatRun(t, db, id, flatGroup{step, 1, 0})
}

// flatGroup is a group of flatRun: its step, how many leaves it has and,
// when not 0, how many action tokens each leaf's turn holds (ids that
// differ from leaf to leaf, which compress badly; 0: the one token 3).
type flatGroup struct {
	step   uint64
	leaves int
	tokens int
}

// flatRun writes run id: a closed group for each of groups, in order, of
// that many such leaves, each a root.
func flatRun(t *testing.T, db *store.DB, id string, groups ...flatGroup) {
	t.Helper()
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun(id, nil, nil)
		if err != nil {
			return err
		}
		seed := uint32(1)
		for _, fg := range groups {
			step := fg.step
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: "t", Prompt: "p", PromptTokens: []uint32{1, 2}})
			if err != nil {
				return err
			}
			for i := range fg.leaves {
				n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i})
				if err != nil {
					return err
				}
				turn := model.Turn{Action: "a", ActionTokens: []uint32{3}, ActionLogprobs: []float32{-1}, Observation: "o", ObservationTokens: []uint32{4}, Done: true}
				if fg.tokens > 0 {
					turn.ActionTokens, turn.ActionLogprobs = make([]uint32, fg.tokens), make([]float32, fg.tokens)
					for k := range turn.ActionTokens {
						seed = seed*1664525 + 1013904223
						turn.ActionTokens[k], turn.ActionLogprobs[k] = seed>>12, -1
					}
				}
				for _, do := range []func() error{
					func() error { return r.AppendTurns(n.ID, 0, turn) },
					func() error { return r.SetReward(n.ID, 1) },
					func() error { return r.SetNodeStatus(n.ID, model.NodeCompleted) },
					func() error {
						return r.PutAdvantage(model.Advantage{Step: step, Group: g.ID, Leaf: n.ID, Outcome: 1, Total: 1, Advantage: 0.5})
					},
				} {
					if err := do(); err != nil {
						return err
					}
				}
			}
			if err := r.CloseGroup(step, g.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The export writes only files it created: a step's file (of any table,
// in either format) that something else put into the export's temporary
// folder first fails the export (leaving nothing behind) rather than being
// written through.
func TestExportRefusesAFileItDidNotCreate(t *testing.T) {
	db := storetest.Open(t)
	flatRun(t, db, "x", flatGroup{1, 1, 0}, flatGroup{2, 1, 0})
	for _, c := range []struct {
		format replay.Format
		name   string
	}{{replay.RL, "rl.parquet"}, {replay.RL, "rl.jsonl"}, {replay.JSONL, "nodes.jsonl"}, {replay.JSONL, "trajectories.jsonl"}} {
		name := c.name
		base := t.TempDir()
		planted := false
		_, err := export(t, db, "x", replay.ExportOptions{Out: filepath.Join(base, "lake"), Format: c.format, OnProgress: func(done, total int64) {
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
