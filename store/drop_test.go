package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// writeStep writes one trainer step of run id: a group whose root A
// expands into B (A's first turn shared), a pruned root P, advantages, a
// usage update of rubric rb (0: create it), a custom event and the
// checkpoint that completes the step. turnBytes sizes each turn's action.
// It returns the rubric.
func writeStep(tb testing.TB, db *store.DB, id string, step, rb uint64, turnBytes int) uint64 {
	tb.Helper()
	update(tb, db, func(tx *store.Tx) error {
		r, err := tx.Run(id)
		if errors.Is(err, model.ErrNotFound) {
			r, err = tx.CreateRun(id, []byte(`{"k":5}`), nil)
		}
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: fmt.Sprintf("task-%d", step), Prompt: "p"})
		if err != nil {
			return err
		}
		turns := func(label string, n int) []model.Turn {
			ts := textTurns(label, n)
			for i := range ts {
				ts[i].Action += strings.Repeat("x", turnBytes)
			}
			return ts
		}
		a, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(a.ID, 0, turns("a", 2)...); err != nil {
			return err
		}
		if err := r.Route(a.ID, model.Decision{Action: model.ActionExpand, Score: 0.9, Children: 1}); err != nil {
			return err
		}
		b, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Parent: a.ID, Fork: 1})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(b.ID, 0, turns("b", 3)...); err != nil {
			return err
		}
		if err := r.SetNodeStatus(b.ID, model.NodeCompleted); err != nil {
			return err
		}
		if err := r.SetReward(b.ID, 1); err != nil {
			return err
		}
		p, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: 1})
		if err != nil {
			return err
		}
		if err := r.AppendTurns(p.ID, 0, turns("p", 1)...); err != nil {
			return err
		}
		if err := r.Route(p.ID, model.Decision{Action: model.ActionPrune, Score: 0.1}); err != nil {
			return err
		}
		if err := r.SetReward(p.ID, 0); err != nil {
			return err
		}
		for _, leaf := range []struct {
			id  uint64
			out float64
		}{{b.ID, 1}, {p.ID, 0}} {
			err := r.PutAdvantage(model.Advantage{Step: step, Group: g.ID, Leaf: leaf.id, Outcome: leaf.out, Total: leaf.out,
				Mean: 0.5, Std: 0.5, Advantage: 2*leaf.out - 1, Rubrics: []uint64{1}})
			if err != nil {
				return err
			}
		}
		if rb == 0 {
			rec, err := r.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "runs the tests", CreatedStep: step})
			if err != nil {
				return err
			}
			rb = rec.ID
		} else {
			rec, err := r.Rubric(rb)
			if err != nil {
				return err
			}
			rec.Usage.Activations++
			rec.Usage.LastActivation = int64(step)
			if err := r.UpdateRubric(rec); err != nil {
				return err
			}
		}
		if _, err := r.AppendEvent("test.note", step, g.ID, 0, 0, map[string]any{"step": step}); err != nil {
			return err
		}
		if err := r.CloseGroup(step, g.ID); err != nil {
			return err
		}
		return r.PutCheckpoint(model.Checkpoint{Step: step, Inline: []byte(fmt.Sprintf("policy-%d", step))})
	})
	return rb
}

// stepDump is what one step holds, through the API.
type stepDump struct {
	Groups []model.Group
	Nodes  []model.Node
	Traj   map[uint64][]model.PathTurn
	Advs   []model.Advantage
}

func dumpStep(tb testing.TB, db *store.DB, id string, step uint64) stepDump {
	tb.Helper()
	d := stepDump{Traj: map[uint64][]model.PathTurn{}}
	inRun(tb, db, false, id, func(r *store.RunTx) (err error) {
		if d.Groups, err = r.Groups(step); err != nil {
			return err
		}
		for _, g := range d.Groups {
			ns, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			d.Nodes = append(d.Nodes, ns...)
			for _, n := range ns {
				if d.Traj[n.ID], err = r.Trajectory(n.ID); err != nil {
					return err
				}
			}
			as, err := r.Advantages(step, g.ID)
			if err != nil {
				return err
			}
			d.Advs = append(d.Advs, as...)
		}
		return nil
	})
	return d
}

func stepsSummary(tb testing.TB, db *store.DB, id string) model.RunSummary {
	tb.Helper()
	var s model.RunSummary
	inRun(tb, db, false, id, func(r *store.RunTx) (err error) {
		s, err = r.Summary(model.SummaryOptions{Steps: true})
		return err
	})
	s.Events = 0 // the drop writes an event
	return s
}

func mustCheck(tb testing.TB, db *store.DB) {
	tb.Helper()
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) || len(vs) > 0 {
		tb.Fatalf("check: %v %v", err, vs)
	}
}

// Dropping old steps deletes their records and nothing else: the file
// checks clean, the kept steps read as before, the run's figures still
// count every step, the rubric keeps the event that wrote it, and the run
// goes on and drops again.
func TestDropStepsKeepsTheRestAndChecksClean(t *testing.T) {
	db := storetest.Open(t)
	var rb uint64
	for s := uint64(1); s <= 6; s++ {
		rb = writeStep(t, db, "r", s, rb, 10)
	}
	kept := map[uint64]stepDump{}
	for s := uint64(4); s <= 6; s++ {
		kept[s] = dumpStep(t, db, "r", s)
	}
	gone := dumpStep(t, db, "r", 2)
	before := stepsSummary(t, db, "r")
	var rubricBefore model.Rubric
	inRun(t, db, false, "r", func(r *store.RunTx) (err error) { rubricBefore, err = r.Rubric(rb); return err })

	var res store.DropResult
	inRun(t, db, true, "r", func(r *store.RunTx) (err error) { res, err = r.DropSteps(3); return err })
	if res.Groups != 3 || res.Nodes != 9 || res.Turns != 18 || res.Advantages != 6 || res.Checkpoints != 3 || res.Events == 0 {
		t.Fatalf("dropped %+v", res)
	}
	mustCheck(t, db)
	before.DroppedStep = 3 // the summary says how far, and nothing else changes

	for s := uint64(1); s <= 3; s++ {
		if d := dumpStep(t, db, "r", s); len(d.Groups) != 0 {
			t.Errorf("step %d still has %d groups", s, len(d.Groups))
		}
	}
	for s, want := range kept {
		if got := dumpStep(t, db, "r", s); !reflect.DeepEqual(got, want) {
			t.Errorf("step %d changed by the drop", s)
		}
	}
	if after := stepsSummary(t, db, "r"); !reflect.DeepEqual(after, before) {
		t.Errorf("summary changed:\n got  %+v\n want %+v", after, before)
	}
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		if _, err := r.Node(gone.Nodes[0].ID); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("node %d of a dropped step: %v, want ErrNotFound", gone.Nodes[0].ID, err)
		}
		if _, err := r.Checkpoint(3); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("checkpoint 3: %v, want ErrNotFound", err)
		}
		if c, err := r.Checkpoint(0); err != nil || c.Step != 6 {
			t.Errorf("latest checkpoint: %+v %v", c, err)
		}
		if got, err := r.Rubric(rb); err != nil || !reflect.DeepEqual(got, rubricBefore) {
			t.Errorf("rubric: %+v %v", got, err)
		}
		info, _ := r.Info()
		if info.DroppedStep != 3 || info.DroppedSeq != res.Seq {
			t.Errorf("run record says dropped through %d / %d, want 3 / %d", info.DroppedStep, info.DroppedSeq, res.Seq)
		}
		var kinds []model.EventKind
		err := r.Events(1, func(e model.Event) error {
			if e.Seq <= res.Seq {
				kinds = append(kinds, e.Kind)
			}
			if e.Seq == r.LastSeq() && e.Kind != model.EvRunDrop {
				t.Errorf("last event is %s, want %s", e.Kind, model.EvRunDrop)
			}
			return nil
		})
		// Left up to the cut: events of step 4 written before it, none here.
		if err != nil || len(kinds) != 0 {
			t.Errorf("events up to the cut: %v %v", kinds, err)
		}
		return nil
	})

	// A recount keeps the dropped steps' figures.
	inRun(t, db, true, "r", func(r *store.RunTx) error { return r.Recount() })
	mustCheck(t, db)
	if after := stepsSummary(t, db, "r"); !reflect.DeepEqual(after, before) {
		t.Errorf("summary after a recount:\n got  %+v\n want %+v", after, before)
	}

	// The run goes on, and drops again.
	for s := uint64(7); s <= 8; s++ {
		rb = writeStep(t, db, "r", s, rb, 10)
	}
	inRun(t, db, true, "r", func(r *store.RunTx) (err error) { _, err = r.DropSteps(6); return err })
	mustCheck(t, db)
	if d := dumpStep(t, db, "r", 7); len(d.Groups) != 1 || len(d.Nodes) != 3 {
		t.Errorf("step 7 after the second drop: %d groups, %d nodes", len(d.Groups), len(d.Nodes))
	}
}

// DropSteps refuses what would lose a resume point or cannot be dropped,
// and the file stays as it was.
func TestDropStepsRefuses(t *testing.T) {
	path := tempPath(t, "drop.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	var rb uint64
	for s := uint64(1); s <= 4; s++ {
		rb = writeStep(t, db, "r", s, rb, 10)
	}
	_ = rb
	inRun(t, db, true, "r", func(r *store.RunTx) (err error) { _, err = r.DropSteps(1); return err })
	before := fileDigest(t, path)
	for _, through := range []uint64{1, 4, 5} {
		err := db.UpdateRun("r", func(r *store.RunTx) error {
			var err error
			_, err = r.DropSteps(through)
			return err
		})
		if !errors.Is(err, model.ErrInvalid) {
			t.Errorf("drop through %d: %v, want ErrInvalid", through, err)
		}
	}
	if after := fileDigest(t, path); after != before {
		t.Error("a refused drop changed the file")
	}
	mustCheck(t, db)
}

// Check holds a dropped run to its rules: a record left in a dropped step
// or a gap in the log past the dropped events is reported.
func TestCheckSeesWhatADropLeftWrong(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(tb testing.TB, tx *store.Tx)
		want   string
	}{
		{"checkpoint of a dropped step", func(tb testing.TB, tx *store.Tx) {
			cks := rawBucket(tb, tx, "r", "ckpt")
			v := cks.Get(u64(3))
			if err := cks.Put(u64(2), v); err != nil {
				tb.Fatal(err)
			}
		}, "checkpoint of step 2, which the run dropped"},
		{"a gap past the dropped events", func(tb testing.TB, tx *store.Tx) {
			ev := rawBucket(tb, tx, "r", "events")
			k, _ := ev.Cursor().Last()
			k, _ = ev.Cursor().Seek(u64(binary.BigEndian.Uint64(k) - 3))
			if err := ev.Delete(k); err != nil {
				tb.Fatal(err)
			}
		}, "sequence jumps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := store.Open(tempPath(t, "damaged.db"), storetest.Options())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var rb uint64
			for s := uint64(1); s <= 4; s++ {
				rb = writeStep(t, db, "r", s, rb, 10)
			}
			inRun(t, db, true, "r", func(r *store.RunTx) (err error) { _, err = r.DropSteps(2); return err })
			mustCheck(t, db)
			if err := db.Update(func(tx *store.Tx) error { c.damage(t, tx); return nil }); err != nil {
				t.Fatal(err)
			}
			vs, err := db.Check(nil)
			if err != nil && !errors.Is(err, store.ErrCorrupt) || !strings.Contains(fmt.Sprint(vs), c.want) {
				t.Fatalf("check: %v %v, want %q", err, vs, c.want)
			}
		})
	}
}

// A file that drops what it no longer needs reuses the pages: writing
// steps 21 to 60 while keeping the last 5 leaves its pages in use (bbolt's
// high-water mark) within 1.2 times what they were at step 20. (The file
// itself grows in steps of up to 16 MiB past its data, too coarse to
// measure a file of a megabyte by: the benchmark in bench/RESULTS.md
// measures the file of a run of LLM-sized steps.)
func TestDropStepsReusesPages(t *testing.T) {
	path := tempPath(t, "reuse.db")
	db := storetest.OpenPath(t, path, storetest.Options())
	var rb uint64
	sizes := func() (file, used int64) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		_ = storetest.Bolt(db).View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
		return fi.Size(), used
	}
	var used20 int64
	for s := uint64(1); s <= 60; s++ {
		rb = writeStep(t, db, "r", s, rb, 16<<10)
		if s > 5 {
			inRun(t, db, true, "r", func(r *store.RunTx) (err error) { _, err = r.DropSteps(s - 5); return err })
		}
		if s == 20 {
			_, used20 = sizes()
		}
	}
	mustCheck(t, db)
	// Without reuse the file would hold 60 steps' pages against 20's (about
	// 3×); with it, what is in use stays near step 20's. The bound leaves
	// room for the order bbolt's freelist hands pages back in, which moved
	// the figure between 1.1× and 1.2× from run to run.
	if _, used := sizes(); used > used20*3/2 {
		t.Errorf("at step 60 the file has %d bytes in use, at step 20 %d: the dropped pages were not reused", used, used20)
	}
}
