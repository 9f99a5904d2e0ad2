package rubricpool

import (
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// The pool reads every rubric in Prepare and again in Apply (the stale
// check), so its cost grows with the number of rubrics a run has ever had,
// merged and retired ones included. These benchmarks put a number on that
// next to a group of 8 judged by 2 active rubrics with one draft.
func BenchmarkPrepare(b *testing.B) {
	for _, size := range []int{10, 1000} {
		b.Run(fmt.Sprintf("rubrics=%d", size), func(b *testing.B) {
			p, g, trajs := benchPool(b, size)
			for b.Loop() {
				if _, err := p.Prepare(ctx, 1, g, trajs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkApply(b *testing.B) {
	errRollback := errors.New("rollback")
	for _, size := range []int{10, 1000} {
		b.Run(fmt.Sprintf("rubrics=%d", size), func(b *testing.B) {
			p, g, trajs := benchPool(b, size)
			res, err := p.Prepare(ctx, 1, g, trajs)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				// Rolled back, so every iteration applies to the same state.
				err := p.db.UpdateRun(testRun, func(r *store.RunTx) error {
					if err := res.Apply(r); err != nil {
						return err
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchPool(b *testing.B, size int) (*Pool, model.Group, []Trajectory) {
	db := newTestDB(b)
	rbs := []model.Rubric{public("more progress is better", "progress"), public("fewer revisits are better", "revisits")}
	for i := len(rbs); i < size; i++ {
		rb := candidate(fmt.Sprintf("an old retired rubric number %d about something", i), "noise")
		rb.Pool = model.PoolRetired
		rbs = append(rbs, rb)
	}
	seed(b, db, rbs...)
	p := newTestPool(b, db, DefaultConfig(), inducerFunc(func(InduceInput) ([]model.Draft, error) {
		return []model.Draft{{Text: "a brand new draft about progress made", Feature: "progress"}}, nil
	}), &featureConsolidator{}, &featureJudge{})
	if _, err := p.BeginStep(ctx, 1); err != nil {
		b.Fatal(err)
	}
	trs := make([]tr, 8)
	for i := range trs {
		trs[i] = tr{reward: float64(i % 2), outcome: float64(i) / 8, feats: feats("progress", float64(i)/8, "revisits", float64(8-i)/8)}
	}
	g, trajs := addGroup(b, db, 1, trs)
	return p, g, trajs
}
