package view_test

import (
	"slices"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The rubric listing shows public rubrics first, then candidates, retired
// and merged ones, each pool in id order when no sort key is given,
// whatever order the ids were created in.
func TestRubricsListPoolsInOrder(t *testing.T) {
	db := storetest.Open(t)
	var want []uint64
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("rb", nil, nil)
		if err != nil {
			return err
		}
		put := func(pool model.RubricPool, into uint64) uint64 {
			rb, err := r.PutRubric(model.Rubric{Pool: pool, MergedInto: into, Text: "rubric", CreatedStep: 1})
			if err != nil {
				t.Fatal(err)
			}
			return rb.ID
		}
		// Created merged first, public last, so id order is not pool order.
		pub1 := put(model.PoolPublic, 0)
		merged := []uint64{put(model.PoolMerged, pub1), put(model.PoolMerged, pub1)}
		retired := []uint64{put(model.PoolPublic, 0), put(model.PoolPublic, 0)}
		for _, id := range retired {
			if _, err := r.MoveRubric(id, store.RubricMove{To: model.PoolRetired, Step: 1, Reason: "low variance"}); err != nil {
				return err
			}
		}
		cands := []uint64{put(model.PoolCandidate, 0), put(model.PoolCandidate, 0)}
		pub2 := put(model.PoolPublic, 0)
		want = append(append(append([]uint64{pub1, pub2}, cands...), retired...), merged...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("rb")
		if err != nil {
			return err
		}
		page, err := view.Rubrics(r, view.RubricQuery{Pools: []model.RubricPool{model.PoolMerged, model.PoolRetired, model.PoolCandidate, model.PoolPublic}})
		if err != nil {
			return err
		}
		var got []uint64
		for _, rb := range page.Rubrics {
			got = append(got, rb.ID)
		}
		if len(got) != len(want) {
			t.Fatalf("listed %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("listed %v, want %v", got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Within a pool, a figure sorts the rubrics highest first, ties by id.
func TestRubricsSortHighestFirst(t *testing.T) {
	db := storetest.Open(t)
	var ids []uint64
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("rb", nil, nil)
		if err != nil {
			return err
		}
		for i, rho := range []float64{0.1, 0.9, 0.5, 0.9} {
			rb, err := r.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "rubric", CreatedStep: 1, Rho: rho, Support: 4 - i})
			if err != nil {
				return err
			}
			ids = append(ids, rb.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("rb")
		if err != nil {
			return err
		}
		for sort, want := range map[string][]uint64{
			"rho":     {ids[1], ids[3], ids[2], ids[0]},
			"support": {ids[0], ids[1], ids[2], ids[3]},
			"id":      {ids[0], ids[1], ids[2], ids[3]},
		} {
			page, err := view.Rubrics(r, view.RubricQuery{Sort: sort})
			if err != nil {
				return err
			}
			var got []uint64
			for _, rb := range page.Rubrics {
				got = append(got, rb.ID)
			}
			if !slices.Equal(got, want) {
				t.Errorf("sorted by %s: %v, want %v", sort, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
