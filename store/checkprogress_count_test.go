package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A phase longer than the reporting interval (16384 records) reports its
// progress on the way: counts that grow, never past the phase's total.
func TestCheckProgressCountsUp(t *testing.T) {
	const turns = 1<<14 + 100
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		ts := make([]model.Turn, turns)
		for i := range ts {
			ts[i] = model.Turn{Action: "a", Observation: "o"}
		}
		return r.AppendTurns(n.ID, 0, ts...)
	})
	var reports []store.CheckProgress
	vs, err := db.Check(&store.CheckOptions{Progress: func(p store.CheckProgress) {
		if p.Phase == "turns" {
			reports = append(reports, p)
		}
	}})
	if err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	if len(reports) != 2 || reports[0].Done != 0 || reports[1].Done != 1<<14 {
		t.Fatalf("turns phase reported %+v, want its start and 16384 done", reports)
	}
	for _, p := range reports {
		if p.Total != turns || p.Run != "r" {
			t.Errorf("report %+v, want total %d of run r", p, turns)
		}
	}
}
