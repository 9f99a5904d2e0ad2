package tree_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// TestCloseRefusesBadShaping: the shaping rules hold for a trainer that
// closes groups itself, not only behind the HTTP API — a score outside
// [-1,1], a negative or infinite lambda, a leaf scored twice or not at all
// are ErrInvalidShaping and write nothing; the same group then closes with
// a shaping that keeps them, its scores named by leaf in any order.
func TestCloseRefusesBadShaping(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 3, 2, 4
	c := coordinator(t, db, "r", cfg, &tree.CoordinatorOptions{LeaseTTL: time.Hour})
	g := openStep(t, c, 1, tasks(1))[0]
	ls := lease(t, c, tree.LeaseRequest{Worker: "w"})
	var subs []rollout.Submission
	for i, l := range ls {
		done := []model.Turn{{Action: "x", Observation: "end", Reward: float64(i), Done: true}}
		subs = append(subs, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: done, Reward: ptr(float64(i))})
	}
	if _, err := submit(c, subs...); err != nil {
		t.Fatal(err)
	}
	a, b, d := ls[0].Node, ls[1].Node, ls[2].Node
	cases := []struct {
		name string
		s    tree.Shaping
	}{
		{"score above 1", tree.Shaping{Scores: []float64{1.5, 0, -0.5}, Lambda: 0.1}},
		{"score below -1", tree.Shaping{Scores: []float64{0, -1.01, 0}, Lambda: 0.1}},
		{"NaN score", tree.Shaping{Scores: []float64{math.NaN(), 0, 0}, Lambda: 0.1}},
		{"negative lambda", tree.Shaping{Scores: []float64{0, 0, 0}, Lambda: -5}},
		{"infinite lambda", tree.Shaping{Scores: []float64{0, 0, 0}, Lambda: math.Inf(1)}},
		{"NaN lambda", tree.Shaping{Scores: []float64{0, 0, 0}, Lambda: math.NaN()}},
		{"too few scores", tree.Shaping{Scores: []float64{0, 0}, Lambda: 0.1}},
		{"too many scores", tree.Shaping{Scores: []float64{0, 0, 0, 0}, Lambda: 0.1}},
		{"leaf scored twice", tree.Shaping{Leaf: []uint64{a, b, d, a}, Scores: []float64{0, 0, 0, 1}, Lambda: 0.1}},
		{"leaf not scored", tree.Shaping{Leaf: []uint64{a, b}, Scores: []float64{0, 0}, Lambda: 0.1}},
		{"a node that is no leaf", tree.Shaping{Leaf: []uint64{a, b, d, 999}, Scores: []float64{0, 0, 0, 0}, Lambda: 0.1}},
		{"leaves and scores differ in length", tree.Shaping{Leaf: []uint64{a, b, d}, Scores: []float64{0, 0}, Lambda: 0.1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := lastSeq(t, db)
			err := db.Update(func(tx *store.Tx) error { _, err := c.Close(tx, 1, g.ID, &tc.s, 0); return err })
			if !errors.Is(err, tree.ErrInvalidShaping) {
				t.Fatalf("Close: %v, want ErrInvalidShaping", err)
			}
			if after := lastSeq(t, db); after != before {
				t.Fatalf("the refused close wrote events %d..%d", before+1, after)
			}
		})
	}
	var gr tree.GroupResult
	ok := &tree.Shaping{Leaf: []uint64{d, a, b}, Scores: []float64{1, -1, 0}, Lambda: 0.5}
	if err := db.Update(func(tx *store.Tx) (err error) { gr, err = c.Close(tx, 1, g.ID, ok, 0); return err }); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]float64{a: -1, b: 0, d: 1}
	for _, adv := range gr.Advantages {
		if adv.RubricScore != want[adv.Leaf] || adv.Lambda != 0.5 || adv.Total != adv.Outcome+0.5*want[adv.Leaf] {
			t.Errorf("leaf %d: %+v, want rubric score %v at lambda 0.5", adv.Leaf, adv, want[adv.Leaf])
		}
	}
}

func lastSeq(t *testing.T, db *store.DB) (seq uint64) {
	t.Helper()
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		seq = r.LastSeq()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return seq
}

// A λ of 0 is a shaping without weight: the group closes with its rubric
// scores recorded and its totals the outcome rewards.
func TestCloseTakesAZeroLambda(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 2, 1, 1
	c := coordinator(t, db, "r", cfg, nil)
	g := openStep(t, c, 1, tasks(1))[0]
	for i, l := range lease(t, c, tree.LeaseRequest{Worker: "w"}) {
		done := []model.Turn{{Action: "x", Observation: "end", Done: true}}
		if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: done, Reward: ptr(float64(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var gr tree.GroupResult
	err := db.Update(func(tx *store.Tx) (err error) {
		gr, err = c.Close(tx, 1, g.ID, &tree.Shaping{Scores: []float64{0.5, -0.5}, Lambda: 0}, 0)
		return err
	})
	if err != nil {
		t.Fatalf("close with lambda 0: %v", err)
	}
	for _, a := range gr.Advantages {
		if a.Lambda != 0 || a.Total != a.Outcome || (a.RubricScore != 0.5 && a.RubricScore != -0.5) {
			t.Errorf("leaf %d: %+v, want its rubric score recorded and its total its outcome", a.Leaf, a)
		}
	}
}
