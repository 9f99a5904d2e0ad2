package store_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A write transaction keeps its groups in memory and writes each changed
// record once, at commit: inside the transaction every reader (by key, by
// id, the walks, Check) sees the latest version, callers get copies, the
// committed file holds the last version, and a rollback leaves none.
func TestGroupChangesWithinTransaction(t *testing.T) {
	db := storetest.Open(t)
	var g model.Group
	var roots []uint64
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		meta := map[string]string{"k": "v"}
		if g, err = r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", PromptTokens: []uint32{7, 8}, Meta: meta}); err != nil {
			return err
		}
		g.Task, g.PromptTokens[0], meta["k"] = "changed by the caller", 99, "changed" // the caller's copies
		for o := range 3 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: o})
			if err != nil {
				return err
			}
			roots = append(roots, n.ID)
			got, err := r.GroupAt(1, g.ID)
			if err != nil {
				return err
			}
			if !slices.Equal(got.Roots, roots) || got.Task != "t" || got.PromptTokens[0] != 7 {
				t.Errorf("after root %d: %+v, want roots %v, task t, prompt tokens 7, 8", o, got, roots)
			}
			got.Roots[0], got.PromptTokens[1] = 12345, 0 // the caller's copy
		}
		if err := r.SetGroupInterval(1, g.ID, 2); err != nil {
			return err
		}
		want := model.Group{ID: g.ID, Step: 1, Task: "t", Roots: roots, Status: model.GroupOpen, Interval: 2, PromptTokens: []uint32{7, 8},
			Meta: map[string]string{"k": "v"}}
		byID, err := r.Group(g.ID)
		if err != nil {
			return err
		}
		latest, err := r.LatestGroup()
		if err != nil {
			return err
		}
		walked, err := r.Groups(1)
		if err != nil {
			return err
		}
		for name, got := range map[string]model.Group{"Group": byID, "LatestGroup": latest, "Groups": walked[0]} {
			if !groupEqual(got, want) {
				t.Errorf("%s inside the transaction: %+v, want %+v", name, got, want)
			}
		}
		if vs, _ := tx.Check(nil); len(vs) > 0 {
			t.Errorf("Check inside the transaction: %v", vs)
		}
		// Changed again after Check wrote it: the commit writes it again.
		return r.SetGroupInterval(1, g.ID, 3)
	})
	errBoom := errors.New("boom")
	err := db.UpdateRun("r", func(r *store.RunTx) error {
		if _, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: 9}); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("rolled-back update: %v", err)
	}
	want := model.Group{ID: g.ID, Step: 1, Task: "t", Roots: roots, Status: model.GroupOpen, Interval: 3, PromptTokens: []uint32{7, 8},
		Meta: map[string]string{"k": "v"}}
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		got, err := r.GroupAt(1, g.ID)
		if err != nil {
			return err
		}
		if !groupEqual(got, want) {
			t.Errorf("committed: %+v, want %+v", got, want)
		}
		// The log holds every version: the last group event is the last change.
		var last model.Group
		err = r.Events(0, func(e model.Event) error {
			if e.Kind == model.EvGroupUpdate {
				return store.DecodePayload(e, &last)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !groupEqual(last, want) {
			t.Errorf("last group event: %+v, want %+v", last, want)
		}
		return nil
	})
	storetest.MustCheckClose(t, db)
}

func groupEqual(a, b model.Group) bool {
	return a.ID == b.ID && a.Step == b.Step && a.Task == b.Task && slices.Equal(a.Roots, b.Roots) &&
		a.Status == b.Status && a.Interval == b.Interval && slices.Equal(a.PromptTokens, b.PromptTokens) && maps.Equal(a.Meta, b.Meta)
}

// A run that lost its groups bucket answers a group lookup with
// ErrCorrupt, in a read and in a write transaction (where groups are kept
// per transaction), rather than crashing or saying the group is absent.
func TestGroupLookupWithoutGroupsBucket(t *testing.T) {
	db := openWithout(t, "groups")
	defer db.Close()
	for _, write := range []bool{false, true} {
		do := db.View
		if write {
			do = db.Update
		}
		err := do(func(tx *store.Tx) error {
			r, err := tx.Run("r1")
			if err != nil {
				return err
			}
			_, err = r.GroupAt(fixtureStep, 1)
			return err
		})
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("write %v: GroupAt without the groups bucket: %v, want ErrCorrupt", write, err)
		}
	}
}
