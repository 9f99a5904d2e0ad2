package store_test

import (
	"fmt"
	"path/filepath"
	"testing"

	bw "github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A write transaction puts its turns and events late, in one pass per
// bucket; every read in the same transaction must still see every write
// made before it, and the commit must hold them all.
func TestQueuedWritesAreReadInTheirTransaction(t *testing.T) {
	db := storetest.Open(t)
	var node uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		node = n.ID
		if err := r.AppendTurns(n.ID, 0, textTurn("one"), textTurn("two")); err != nil {
			return err
		}
		got, err := r.Turns(n.ID)
		if err != nil || len(got) != 2 || got[1].Action != "act two" {
			t.Errorf("turns read back in the writing transaction: %d, %v", len(got), err)
		}
		before := r.LastSeq()
		if err := r.Score(n.ID, model.Score{Interval: 0, Turn: 2, Value: 0.5}); err != nil {
			return err
		}
		var kinds []model.EventKind
		if err := r.Events(before, func(e model.Event) error {
			kinds = append(kinds, e.Kind)
			return nil
		}); err != nil {
			return err
		}
		if len(kinds) != 2 || kinds[0] != model.EvTurns || kinds[1] != model.EvNodeScore {
			t.Errorf("events from %d read in the writing transaction: %v; want node.turns, node.score", before, kinds)
		}
		// Appends after a read are queued again and read again.
		if err := r.AppendTurns(n.ID, 2, textTurn("three")); err != nil {
			return err
		}
		traj, err := r.Trajectory(n.ID)
		if err != nil || len(traj) != 3 {
			t.Errorf("trajectory in the writing transaction: %d turns, %v; want 3", len(traj), err)
		}
		return nil
	})
	view(t, db, func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		got, err := r.Turns(node)
		if err != nil || len(got) != 3 || got[2].Action != "act three" {
			t.Errorf("committed turns: %d, %v; want 3", len(got), err)
		}
		return nil
	})
	storetest.MustCheckClose(t, db)
}

// How a trainer cuts its writes into transactions changes nothing stored.
// The same PaTR batches — node records changed several times, turns and
// events queued, chunks handed from one commit to the next — go into one
// file one call per transaction, into another one interval per
// transaction, and into a third a whole step per transaction; with the
// same clock the three files hold the same keys, values and bucket
// sequences, byte for byte.
func TestTransactionBatchingStoresTheSameBytes(t *testing.T) {
	for _, cfg := range []bw.Config{bw.FrozenLakeConfig(3), bw.SWEConfig(5)} {
		cfg.Trees = 3
		if cfg.Kind == bw.SWE {
			cfg.ActionTokens, cfg.ObservationTokens = 40, 80
		}
		gen, err := bw.NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var steps [][][]bw.Op // step, transaction (one interval), ops
		for range 3 {
			steps = append(steps, gen.Next().Txns)
		}
		cuts := map[string]func(step [][]bw.Op) [][]bw.Op{
			"call": func(step [][]bw.Op) (out [][]bw.Op) {
				for _, txn := range step {
					for _, op := range txn {
						out = append(out, []bw.Op{op})
					}
				}
				return out
			},
			"interval": func(step [][]bw.Op) [][]bw.Op { return step },
			"step": func(step [][]bw.Op) [][]bw.Op {
				var all []bw.Op
				for _, txn := range step {
					all = append(all, txn...)
				}
				return [][]bw.Op{all}
			},
		}
		files := map[string]map[string]string{}
		for name, cut := range cuts {
			db := storetest.OpenPath(t, filepath.Join(t.TempDir(), name+".db"), storetest.Options())
			if err := db.Update(func(tx *store.Tx) error {
				_, err := tx.CreateRun("bench", nil, nil)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for _, step := range steps {
				for _, txn := range cut(step) {
					if err := bw.ApplyTxn(db, "bench", bw.Materialize(txn)); err != nil {
						t.Fatalf("%v, one transaction per %s: %v", cfg.Kind, name, err)
					}
				}
			}
			files[name] = boltContents(t, db)
		}
		want := files["call"]
		for _, name := range []string{"interval", "step"} {
			if diff := diffContents(want, files[name]); diff != "" {
				t.Errorf("%v: one transaction per %s stores other bytes than one per call: %s", cfg.Kind, name, diff)
			}
		}
	}
}

// diffContents describes the first differences between two files'
// contents ("" when they are the same).
func diffContents(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			d = append(d, fmt.Sprintf("missing %q", k))
		} else if v != w {
			d = append(d, fmt.Sprintf("%q differs (%d vs %d bytes)", k, len(v), len(w)))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, fmt.Sprintf("extra %q", k))
		}
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("%d keys, e.g. %v", len(d), d[:min(3, len(d))])
}
