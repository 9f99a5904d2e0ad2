package store_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// loadCopy loads run id of src into dst under as, from its events and
// turns read through the API, and returns Finish's error.
func loadCopy(tb testing.TB, src, dst *store.DB, id, as string, skipTurn func(node uint64, index int) bool) error {
	tb.Helper()
	l, err := dst.LoadRun(as)
	if err != nil {
		tb.Fatal(err)
	}
	d := dumpRun(tb, src, id)
	for _, e := range d.Events {
		if err := l.Event(e); err != nil {
			return err
		}
	}
	for _, n := range d.Nodes {
		for i, t := range d.Turns[n.ID] {
			if skipTurn != nil && skipTurn(n.ID, i) {
				continue
			}
			if err := l.Turn(n.ID, i, t); err != nil {
				return err
			}
		}
	}
	return l.Finish()
}

// A run rebuilt from its events and turns is the run: every record,
// index, counter and event as the original's, under its new name.
func TestLoadRunRebuildsTheRun(t *testing.T) {
	src := storetest.Open(t)
	f := buildFixture(t, src)
	// Turns appended in later commits, interleaved: B's turns in two
	// ranges; a policy version published, the last run record logged.
	inRun(t, src, true, "r1", func(r *store.RunTx) error {
		if err := r.AppendTurns(f.X, 1, textTurns("x", 2)...); err != nil {
			return err
		}
		if err := r.AppendTurns(f.B, 2, textTurns("bb", 2)...); err != nil {
			return err
		}
		if _, err := r.PutReply(store.Reply{Key: "k1", Op: "POST /x", Status: 201, Body: []byte(`{"a":1}`)}); err != nil {
			return err
		}
		return r.PublishVersion(3)
	})
	dst := storetest.Open(t)
	if err := loadCopy(t, src, dst, "r1", "copy", nil); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, dst)
	if rep, err := lookUp(t, dst, false, "copy", "k1"); err != nil || rep.Status != 201 {
		t.Errorf("the copy's reply to k1: %+v %v", rep, err)
	}
	want, got := dumpRun(t, src, "r1"), dumpRun(t, dst, "copy")
	want.Info.ID = "copy"
	for i := range want.Events {
		if _, run := store.RecordFor(want.Events[i].Kind).(*model.Run); run {
			want.Events[i].Payload, got.Events[i].Payload = nil, nil // the run's name is in it
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the loaded run differs:\n got  %+v\n want %+v", got.Info, want.Info)
	}
	var a, b model.RunSummary
	inRun(t, src, false, "r1", func(r *store.RunTx) (err error) { a, err = r.Summary(model.SummaryOptions{Steps: true}); return err })
	inRun(t, dst, false, "copy", func(r *store.RunTx) (err error) { b, err = r.Summary(model.SummaryOptions{Steps: true}); return err })
	a.Run = "copy"
	if !reflect.DeepEqual(a, b) {
		t.Errorf("summary:\n got  %+v\n want %+v", b, a)
	}
	// The copy takes writes, from where the original's ids left off.
	inRun(t, dst, true, "copy", func(r *store.RunTx) error {
		n, err := r.AddNode(store.NodeSpec{Step: f.G2.Step, Group: f.G2.ID, Ordinal: 1})
		if err == nil && n.ID != f.X+1 {
			t.Errorf("new node %d, want %d", n.ID, f.X+1)
		}
		return err
	})
	mustCheck(t, dst)
}

// A copy that does not rebuild a sound run (here: a turn is missing) is
// refused whole: nothing of it is left in the file.
func TestLoadRunRefusesABrokenLog(t *testing.T) {
	src := storetest.Open(t)
	buildFixture(t, src)
	dst := storetest.Open(t)
	err := loadCopy(t, src, dst, "r1", "copy", func(_ uint64, index int) bool { return index == 1 })
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("load of a copy missing turns: %v, want ErrCorrupt", err)
	}
	view(t, dst, func(tx *store.Tx) error {
		if ids, _ := tx.RunIDs(); len(ids) != 0 {
			t.Errorf("runs left: %v", ids)
		}
		return nil
	})
}
