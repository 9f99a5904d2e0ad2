package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A rubric merges only into one that is kept (public or retired): merging
// into a candidate would point at a rubric that may itself be dropped.
func TestRubricMergesOnlyIntoKeptRubric(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.PutRubric(model.Rubric{Pool: model.PoolMerged, MergedInto: f.RCand1, Text: "draft three", CreatedStep: 2})
		return err
	})
	if !errors.Is(err, model.ErrInvalid) {
		t.Errorf("merging into candidate %d: %v, want ErrInvalid", f.RCand1, err)
	}
}

// A run that lost its rubrics bucket refuses rubric writes as corrupt.
func TestPutRubricWithoutRubricsBucket(t *testing.T) {
	db := openWithout(t, "rubrics")
	defer db.Close()
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "draft three", CreatedStep: 2})
		return err
	})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("PutRubric without a rubrics bucket: %v, want ErrCorrupt", err)
	}
}
