package tree_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// TestBarrierGroupGrowsTheSameTrees: a group that routes as soon as its
// own branches are through grows exactly the trees of the step-wide
// barrier, committing as branches finish or turn by turn.
func TestBarrierGroupGrowsTheSameTrees(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed, cfg.MaxActive = 2, 10, 31, 6
	for _, mode := range []tree.CommitMode{tree.CommitInterval, tree.CommitTurn} {
		var want []string
		for _, barrier := range []tree.Barrier{tree.BarrierStep, tree.BarrierGroup} {
			run := fmt.Sprintf("m%d-b%d", mode, barrier)
			newRun(t, db, run, cfg)
			o := hashOpts(cfg, mode, true, nil)
			o.Policy, o.Env, o.Barrier, o.Shaper = byBranch{o.Policy}, byBranchEnv{o.Env}, barrier, &fakeShaper{lambda: 0.25}
			if _, err := mustEngine(t, db, run, o).Rollout(context.Background(), 1, tasks(6)); err != nil {
				t.Fatal(err)
			}
			got := canonical(t, db, run)
			if want == nil {
				want = got
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("commit %d: the group barrier grew other trees:\n got  %s\n want %s", mode, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
			}
		}
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// slowEnv makes every step of one task's episodes take a while.
type slowEnv struct {
	rollout.Env
	task string
	wait time.Duration
}

type slowEpisode struct {
	rollout.Episode
	wait time.Duration
}

func (e slowEnv) Reset(ctx context.Context, task rollout.Task) (rollout.Episode, error) {
	ep, err := e.Env.Reset(ctx, task)
	return e.wrap(task, ep), err
}

func (e slowEnv) Restore(ctx context.Context, task rollout.Task, hist []model.Turn, state []byte) (rollout.Episode, error) {
	ep, err := e.Env.Restore(ctx, task, hist, state)
	return e.wrap(task, ep), err
}

func (e slowEnv) wrap(task rollout.Task, ep rollout.Episode) rollout.Episode {
	if task.ID != e.task || ep == nil {
		return ep
	}
	return slowEpisode{ep, e.wait}
}

func (ep slowEpisode) Step(ctx context.Context, key rollout.TurnKey, mv rollout.Move) (rollout.Observation, error) {
	time.Sleep(ep.wait)
	return ep.Episode.Step(ctx, key, mv)
}

// TestGroupsDoNotWaitForEachOther: under the group barrier, the trees of
// fast tasks grow and close while one task's slow tool calls are still
// running; under the step barrier they wait for it interval by interval.
func TestGroupsDoNotWaitForEachOther(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 6, 41
	ts := tasks(4)
	for _, barrier := range []tree.Barrier{tree.BarrierGroup, tree.BarrierStep} {
		run := fmt.Sprint("b", barrier)
		newRun(t, db, run, cfg)
		o := hashOpts(cfg, tree.CommitInterval, false, nil)
		o.Barrier, o.Workers = barrier, 32
		o.Env = slowEnv{Env: o.Env, task: ts[0].ID, wait: 300 * time.Millisecond}
		if _, err := mustEngine(t, db, run, o).Rollout(context.Background(), 1, ts); err != nil {
			t.Fatal(err)
		}
		// In the event log: the slow group's first routing, and how many
		// fast groups had closed by then.
		var slowGroup uint64
		closedFirst, routed := 0, false
		if err := db.View(func(tx *store.Tx) error {
			r, _ := tx.Run(run)
			gs, _ := r.Groups(1)
			for _, g := range gs {
				if g.Task == ts[0].ID {
					slowGroup = g.ID
				}
			}
			return r.Events(1, func(e model.Event) error {
				switch {
				case e.Kind == model.EvNodeRoute && e.Group == slowGroup:
					routed = true
				case e.Kind == model.EvGroupClose && e.Group != slowGroup && !routed:
					closedFirst++
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		switch {
		case barrier == tree.BarrierGroup && closedFirst != len(ts)-1:
			t.Errorf("group barrier: %d of %d fast groups closed before the slow one first routed", closedFirst, len(ts)-1)
		case barrier == tree.BarrierStep && closedFirst != 0:
			t.Errorf("step barrier: %d fast groups closed before the slow one first routed", closedFirst)
		}
	}
}
