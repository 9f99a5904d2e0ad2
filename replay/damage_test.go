package replay_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A view of a damaged part of a run is ErrCorrupt, never a partial view
// without an error: an ancestor's node record damaged fails the
// trajectory, branches, group and search views of what lies below it; a
// group's advantage record damaged fails the views that show a leaf's
// advantage, the branches side by side, the run's statistics and the
// step figures; a step's counters damaged fail the statistics and the
// environment steps; an event damaged fails the statistics and the step
// figures, which read the log; a leaf's turn damaged fails its trajectory
// and the branches beside it.
func TestViewsOfDamagedRecordsFail(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.patrdb")
	db := storetest.OpenPath(t, filepath.Join(dir, "built.patrdb"), storetest.Options())
	replaytest.BuildOneTx(t, db, replaytest.MediumSpec("m"))
	// An inner node (a parent of two leaves), one of its leaves and their
	// group's first advantage record, each stored once.
	var inner, group uint64
	var leaves []uint64
	var innerKey, advKey []byte
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("m")
		if err != nil {
			return err
		}
		b := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("m"))
		return r.ForEachGroup(0, func(g model.Group) error {
			if inner != 0 {
				return nil
			}
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			kids := map[uint64][]uint64{}
			for _, n := range nodes {
				if n.Parent != 0 && n.Status.Leaf() {
					kids[n.Parent] = append(kids[n.Parent], n.ID)
				}
			}
			for p, ks := range kids {
				k := binary.BigEndian.AppendUint64(nil, p)
				if len(ks) >= 2 && inner == 0 {
					inner, innerKey, leaves, group = p, k, ks[:2], g.ID
				}
			}
			if inner != 0 {
				prefix := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, g.Step), g.ID)
				advKey, _ = b.Bucket([]byte("adv")).Cursor().Seek(prefix)
				if !bytes.HasPrefix(advKey, prefix) {
					t.Fatalf("group %d has no advantage record", g.ID)
				}
				advKey = bytes.Clone(advKey)
			}
			return nil
		})
	})
	if err != nil || inner == 0 {
		t.Fatalf("no inner node with two leaves: %v", err)
	}
	// The first leaf's first own turn: turns are keyed by where they are
	// stored (the node's first turn range) and the node.
	var turnKey []byte
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("m")
		if err != nil {
			return err
		}
		n, err := r.Node(leaves[0])
		if err != nil || len(n.TurnRanges) == 0 {
			return fmt.Errorf("leaf %d: %d turn ranges, %v", leaves[0], len(n.TurnRanges), err)
		}
		turnKey = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, n.TurnRanges[0].Seq), n.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := store.Compact(db, src, nil); err != nil {
		t.Fatal(err)
	}
	views := map[string]func(r *store.RunTx) error{
		"trajectory": func(r *store.RunTx) error { _, err := view.ViewTrajectory(r, leaves[0]); return err },
		"branches":   func(r *store.RunTx) error { _, err := view.ViewBranches(r, leaves); return err },
		"group":      func(r *store.RunTx) error { _, err := view.ViewGroup(r, group); return err },
		"search": func(r *store.RunTx) error {
			_, err := view.Search(r, view.NodeQuery{Limit: view.MaxSearchLimit})
			return err
		},
		"stats":        func(r *store.RunTx) error { _, err := replay.Stats(r); return err },
		"env steps":    func(r *store.RunTx) error { _, err := view.EnvSteps(r); return err },
		"step figures": func(r *store.RunTx) error { _, err := replay.StepFigures(r); return err },
	}
	for _, c := range []struct {
		bucket string
		key    []byte
		views  []string
	}{
		{"nodes", innerKey, []string{"trajectory", "branches", "group", "search", "stats"}},
		{"adv", advKey, []string{"trajectory", "branches", "group", "stats", "step figures"}},
		{"counts", binary.BigEndian.AppendUint64(nil, 1), []string{"stats", "env steps"}},
		{"events", binary.BigEndian.AppendUint64(nil, 2), []string{"stats", "step figures"}},
		{"turns", turnKey, []string{"trajectory", "branches"}},
	} {
		ddb := storetest.OpenDamaged(t, src, "m", c.bucket, c.key)
		for _, name := range c.views {
			err := ddb.View(func(tx *store.Tx) error {
				r, err := tx.Run("m")
				if err != nil {
					return err
				}
				return views[name](r)
			})
			if !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("%s record damaged: the %s view: %v, want ErrCorrupt", c.bucket, name, err)
			}
		}
		ddb.Close()
	}
}
