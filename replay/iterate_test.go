package replay_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func TestIterateTyped(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.SmallSpec("r")
	replaytest.BuildOneTx(t, db, spec)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		if err != nil {
			return err
		}
		last := r.LastSeq()
		want := map[model.EventKind]reflect.Type{
			model.EvRunCreate: reflect.TypeFor[*model.Run](), model.EvRunStatus: reflect.TypeFor[*model.Run](),
			model.EvGroupOpen: reflect.TypeFor[*model.Group](), model.EvGroupUpdate: reflect.TypeFor[*model.Group](),
			model.EvGroupClose: reflect.TypeFor[*model.Group](), model.EvNodeAdd: reflect.TypeFor[*model.Node](),
			model.EvNodeScore: reflect.TypeFor[*model.Node](), model.EvNodeRoute: reflect.TypeFor[*model.Node](),
			model.EvNodeStatus: reflect.TypeFor[*model.Node](), model.EvNodeReward: reflect.TypeFor[*model.Node](),
			model.EvNodeEnvState: reflect.TypeFor[*model.Node](),
			model.EvTurns:        reflect.TypeFor[*model.TurnsPayload](), model.EvAdvantage: reflect.TypeFor[*model.Advantage](),
			model.EvRubricPut: reflect.TypeFor[*model.Rubric](), model.EvRubricMove: reflect.TypeFor[*model.Rubric](),
			model.EvRubricUpdate: reflect.TypeFor[*model.Rubric](), model.EvCheckpoint: reflect.TypeFor[*model.Checkpoint](),
		}
		seen := map[model.EventKind]int{}
		next := uint64(1)
		err = replay.Iterate(r, 0, 0, func(e replay.Event) error {
			if e.Seq != next {
				t.Fatalf("event %d, want %d", e.Seq, next)
			}
			next++
			seen[e.Kind]++
			if typ, ok := want[e.Kind]; ok {
				if reflect.TypeOf(e.Record) != typ {
					t.Errorf("event %d (%s): record %T, want %v", e.Seq, e.Kind, e.Record, typ)
				}
				if n, ok := e.Record.(*model.Node); ok && n.ID != e.Node {
					t.Errorf("event %d: node record %d, event names node %d", e.Seq, n.ID, e.Node)
				}
				return nil
			}
			if e.Record != nil {
				t.Errorf("custom event %d (%s) decoded to %T", e.Seq, e.Kind, e.Record)
			}
			g, err := e.Generic()
			if err != nil {
				return err
			}
			if m, ok := g.(map[string]any); !ok || m["wins"] == nil {
				t.Errorf("custom payload %#v", g)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if next != last+1 {
			t.Errorf("saw events up to %d, log ends at %d", next-1, last)
		}
		for k := range want {
			if seen[k] == 0 {
				t.Errorf("the fixture wrote no %s event", k)
			}
		}
		if seen["rubric.judge"] != spec.Steps {
			t.Errorf("%d rubric.judge events, want %d", seen["rubric.judge"], spec.Steps)
		}

		// Ranges.
		count := func(from, to uint64) (int, error) {
			n := 0
			err := replay.Iterate(r, from, to, func(e replay.Event) error {
				if e.Seq < max(from, 1) || (to != 0 && e.Seq > to) {
					t.Errorf("Iterate(%d, %d) gave event %d", from, to, e.Seq)
				}
				n++
				return nil
			})
			return n, err
		}
		for _, c := range []struct {
			from, to uint64
			n        int
			err      error
		}{
			{10, 20, 11, nil},
			{last, 0, 1, nil},
			{last, last, 1, nil},
			{last + 1, 0, 0, nil}, // nothing new yet
			{last + 2, 0, 0, replay.ErrSeqRange},
			{1, last + 1, 0, replay.ErrSeqRange},
			{20, 10, 0, replay.ErrSeqRange},
		} {
			n, err := count(c.from, c.to)
			if !errors.Is(err, c.err) || (c.err == nil && n != c.n) {
				t.Errorf("Iterate(%d, %d): %d events, %v; want %d, %v", c.from, c.to, n, err, c.n, c.err)
			}
		}
		// A from past the end says where the run ends, so the caller
		// knows what to ask for instead.
		err = replay.Iterate(r, last+2, 0, func(replay.Event) error { return nil })
		if want := fmt.Sprintf("ends at event %d", last); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Iterate past the end: %v, want it to say the run %s", err, want)
		}
		// An event without a payload shows as none, not as an error.
		if g, err := (replay.Event{}).Generic(); g != nil || err != nil {
			t.Errorf("the generic payload of an empty one: %v, %v", g, err)
		}
		// fn's error stops the walk and comes back as is.
		stop := errors.New("enough")
		n := 0
		err = replay.Iterate(r, 0, 0, func(replay.Event) error { n++; return stop })
		if err != stop || n != 1 {
			t.Errorf("stop: %v after %d events", err, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An event of a store kind whose payload is not that kind's record (a log
// the store would not write: storetest.AppendRawEvent) stops the walk with
// ErrCorrupt at that event: fn never sees it, nor anything after it.
func TestIterateStopsAtAnUndecodableEvent(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "r.patrdb"), storetest.Options()) // no check at close: the log is wrong on purpose
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var bad uint64
	err = db.Update(func(tx *store.Tx) error {
		r, _, _, err := replaytest.OneNode(tx, "r")
		if err != nil {
			return err
		}
		if bad, err = storetest.AppendRawEvent(r, model.EvNodeAdd, 1, 1, 1, 0, "not a node"); err != nil {
			return err
		}
		_, err = r.AppendEvent("custom", 1, 0, 0, 0, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		return replay.Iterate(r, 0, 0, func(e replay.Event) error { seen = append(seen, e.Seq); return nil })
	})
	if !errors.Is(err, store.ErrCorrupt) || len(seen) != int(bad)-1 {
		t.Errorf("walk over event %d that does not decode: %v, saw %v; want ErrCorrupt after events 1 to %d", bad, err, seen, bad-1)
	}
}
