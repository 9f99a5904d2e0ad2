package tree_test

import (
	"context"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// badLogprobs samples, for task-0 only, turns the store refuses (a
// positive logprob).
type badLogprobs struct{ inner rollout.Policy }

func (p badLogprobs) Act(ctx context.Context, key rollout.TurnKey, task rollout.Task, hist []model.Turn) (rollout.Move, error) {
	mv, err := p.inner.Act(ctx, key, task, hist)
	if task.ID == "task-0" {
		mv.Logprobs[0] = 0.5
	}
	return mv, err
}

// A branch whose turns the store refuses fails like a branch whose policy
// failed — retried, then recorded failed with the store's reason — and the
// rest of the step is grown and written as if it were not there: one bad
// turn never fails the whole submit it travels in.
func TestEngineFailsOnlyTheBranchWhoseTurnsAreRefused(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.NoScoring, cfg.B0, cfg.K, cfg.MaxTurns = true, 2, 2, 4
	newRun(t, db, "r", cfg)
	o := hashOpts(cfg, tree.CommitInterval, false, nil)
	o.Policy, o.Barrier = badLogprobs{o.Policy}, tree.BarrierGroup
	if _, err := mustEngine(t, db, "r", o).Rollout(context.Background(), 1, tasks(2)); err != nil {
		t.Fatal(err)
	}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		gs, err := r.Groups(1)
		if err != nil || len(gs) != 2 {
			t.Fatalf("groups %+v, %v", gs, err)
		}
		for _, g := range gs {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				bad := g.Task == "task-0"
				if failed := n.Status == model.NodeFailed && strings.Contains(n.Error, "logprob"); failed != bad || (bad && n.Turns != 0) {
					t.Errorf("%s: node %d %s with %d turns (%q)", g.Task, n.ID, n.Status, n.Turns, n.Error)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
