package tree_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// flatEnv ends every episode after one turn: tasks named flat-* pay every
// branch 1 (a group without variance), the others pay by the branch.
type flatEnv struct{}

type flatEpisode struct{ task string }

func (flatEnv) Reset(_ context.Context, task rollout.Task) (rollout.Episode, error) {
	return flatEpisode{task.ID}, nil
}

func (flatEnv) Restore(_ context.Context, task rollout.Task, _ []model.Turn, _ []byte) (rollout.Episode, error) {
	return flatEpisode{task.ID}, nil
}

func (ep flatEpisode) Step(_ context.Context, key rollout.TurnKey, _ rollout.Move) (rollout.Observation, error) {
	r := 1.0
	if !strings.HasPrefix(ep.task, "flat-") {
		r = float64(key.Branch % 2)
	}
	return rollout.Observation{Text: "end", Reward: r, Done: true}, nil
}

func (flatEpisode) State() []byte { return nil }

type constPolicy struct{}

func (constPolicy) Act(context.Context, rollout.TurnKey, rollout.Task, []model.Turn) (rollout.Move, error) {
	return rollout.Move{Text: "go"}, nil
}

// TestRolloutInformative: a step that wants three informative groups
// opens further tasks, in order, until the third closes with outcome
// variance — exactly the tasks up to it — records each filtered group (an
// event of the group, naming no node or rubric), and stops at MaxTasks
// when the tasks run short of it, never asking for more than MaxTasks
// leaves room for; either barrier.
func TestRolloutInformative(t *testing.T) {
	seq := []string{"flat-0", "flat-1", "vary-0", "flat-2", "vary-1", "flat-3", "vary-2", "vary-3", "vary-4"}
	task := func(id string) rollout.Task { return rollout.Task{ID: id, Prompt: "p " + id} }
	for _, c := range []struct {
		name     string
		barrier  tree.Barrier
		maxTasks int
		opened   int
		inf      []string
	}{
		{"group barrier", tree.BarrierGroup, 0, 7, []string{"vary-0", "vary-1", "vary-2"}},
		{"step barrier", tree.BarrierStep, 0, 7, []string{"vary-0", "vary-1", "vary-2"}},
		{"capped", tree.BarrierGroup, 5, 5, []string{"vary-0", "vary-1"}},
		// Two groups short of the want with room for one: one more task.
		{"capped below the shortfall", tree.BarrierStep, 4, 4, []string{"vary-0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := storetest.Open(t)
			cfg := tree.DefaultConfig()
			cfg.NoScoring, cfg.B0, cfg.K, cfg.MaxTurns = true, 4, 1, 1
			newRun(t, db, "r", cfg)
			e := mustEngine(t, db, "r", tree.Options{Config: cfg, Policy: constPolicy{}, Env: flatEnv{}, Barrier: c.barrier})
			next := 3
			more := func(n int) ([]rollout.Task, error) {
				if c.maxTasks > 0 && n > c.maxTasks-next {
					t.Errorf("More(%d) asked with %d tasks opened of MaxTasks %d", n, next, c.maxTasks)
				}
				var out []rollout.Task
				for ; n > 0 && next < len(seq); n, next = n-1, next+1 {
					out = append(out, task(seq[next]))
				}
				return out, nil
			}
			res, err := e.RolloutInformative(context.Background(), 1, []rollout.Task{task(seq[0]), task(seq[1]), task(seq[2])},
				tree.Sampling{Want: 3, More: more, MaxTasks: c.maxTasks})
			if err != nil {
				t.Fatal(err)
			}
			var groups []model.Group
			filterEvents := map[uint64]bool{}
			if err := db.View(func(tx *store.Tx) error {
				r, _ := tx.Run("r")
				groups, _ = r.Groups(1)
				return r.Events(1, func(ev model.Event) error {
					if ev.Kind == tree.EvGroupFilter {
						filterEvents[ev.Group] = true
						if ev.Step != 1 || ev.Node != 0 || ev.Rubric != 0 {
							t.Errorf("filter event %+v: want the group's, at step 1, of no node or rubric", ev)
						}
					}
					return nil
				})
			}); err != nil {
				t.Fatal(err)
			}
			var opened, inf []string
			byID := map[uint64]string{}
			for _, g := range groups {
				opened = append(opened, g.Task)
				byID[g.ID] = g.Task
				if g.Status != model.GroupClosed {
					t.Errorf("group %d (%s) left %s", g.ID, g.Task, g.Status)
				}
			}
			for _, id := range res.Informative {
				inf = append(inf, byID[id])
			}
			if !reflect.DeepEqual(opened, seq[:c.opened]) || !reflect.DeepEqual(inf, c.inf) {
				t.Fatalf("opened %v, informative %v; want %v and %v", opened, inf, seq[:c.opened], c.inf)
			}
			if len(res.Filtered) != c.opened-len(c.inf) || len(filterEvents) != len(res.Filtered) {
				t.Fatalf("filtered %v with events for %v", res.Filtered, filterEvents)
			}
			for _, id := range res.Filtered {
				if !strings.HasPrefix(byID[id], "flat-") || !filterEvents[id] {
					t.Errorf("group %d (%s) filtered, event %t", id, byID[id], filterEvents[id])
				}
			}
		})
	}
}

// TestRolloutInformativeResumes: driven again after its tasks were
// extended, a step continues from the tasks it holds.
func TestRolloutInformativeResumes(t *testing.T) {
	db, e := flatEngine(t)
	first := []rollout.Task{{ID: "flat-a", Prompt: "p"}}
	c, err := tree.NewCoordinator(db, "r", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	openStep(t, c, 1, append(first, rollout.Task{ID: "vary-b", Prompt: "p"})) // extended before a crash
	res, err := e.RolloutInformative(context.Background(), 1, first, tree.Sampling{Want: 1,
		More: func(int) ([]rollout.Task, error) { return nil, fmt.Errorf("no more needed") }})
	if err != nil || len(res.Informative) != 1 || len(res.Filtered) != 1 {
		t.Fatalf("resumed: %+v %v", res, err)
	}
	// Driven again with a first task that is not the one the step holds,
	// it is refused, naming what differs, and nothing is opened.
	openStep(t, c, 2, append(first, rollout.Task{ID: "vary-b", Prompt: "p"}))
	for field, task := range map[string]rollout.Task{
		"prompt": {ID: "flat-a", Prompt: "q"}, "gold": {ID: "flat-a", Prompt: "p", Gold: "g"},
	} {
		_, err := e.RolloutInformative(context.Background(), 2, []rollout.Task{task}, tree.Sampling{Want: 1,
			More: func(int) ([]rollout.Task, error) { return nil, fmt.Errorf("no more needed") }})
		if !errors.Is(err, rollout.ErrStepExists) || !strings.Contains(err.Error(), "differs in its "+field) {
			t.Errorf("resumed with another %s: %v, want ErrStepExists naming it", field, err)
		}
	}
	if err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("r")
		gs, err := r.Groups(2)
		if err == nil && len(gs) != 2 {
			t.Errorf("step 2 holds %d groups after the refusals, want its 2", len(gs))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A step whose tasks fall short and whose More fails ends with More's
// error, not with a result.
func TestRolloutInformativeFailsWhenMoreFails(t *testing.T) {
	_, e := flatEngine(t)
	gone := errors.New("dataset gone")
	res, err := e.RolloutInformative(context.Background(), 1, []rollout.Task{{ID: "flat-a", Prompt: "p"}}, tree.Sampling{Want: 1,
		More: func(int) ([]rollout.Task, error) { return nil, gone }})
	if !errors.Is(err, gone) || res != nil {
		t.Fatalf("More failed: %+v, %v; want no result and its error", res, err)
	}
}

// Dynamic sampling refuses, opening nothing, a want below 1, no More
// function, a negative MaxTasks (ErrInvalidConfig) and step 0.
func TestRolloutInformativeRefusesBadSampling(t *testing.T) {
	db, e := flatEngine(t)
	more := func(int) ([]rollout.Task, error) { return nil, nil }
	ts := []rollout.Task{{ID: "flat-a", Prompt: "p"}}
	for name, c := range map[string]struct {
		step uint64
		s    tree.Sampling
		want error
	}{
		"want 0":      {1, tree.Sampling{Want: 0, More: more}, tree.ErrInvalidConfig},
		"no More":     {1, tree.Sampling{Want: 1}, tree.ErrInvalidConfig},
		"MaxTasks -1": {1, tree.Sampling{Want: 1, More: more, MaxTasks: -1}, tree.ErrInvalidConfig},
		"step 0":      {0, tree.Sampling{Want: 1, More: more}, model.ErrInvalid},
	} {
		res, err := e.RolloutInformative(context.Background(), c.step, ts, c.s)
		if !errors.Is(err, c.want) || res != nil {
			t.Errorf("%s: %+v, %v; want %v", name, res, err, c.want)
		}
	}
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		gs, err := r.Groups(0)
		if len(gs) != 0 {
			t.Errorf("refused samplings opened %d groups", len(gs))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A group all of whose branches failed closes with no advantage and, as a
// group with no gradient, gets its filter event; the step's informative
// groups over a damaged group record are ErrCorrupt.
func TestCloseSampledOfAGroupWithoutLeaves(t *testing.T) {
	db := openUnchecked(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), &tree.CoordinatorOptions{MaxAttempts: 1})
	g := openStep(t, c, 1, tasks(2))
	for _, l := range lease(t, c, tree.LeaseRequest{Worker: "w", Step: 1, Max: 100}) {
		if l.Group != g[0].ID {
			continue
		}
		if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Error: "env crashed"}); err != nil {
			t.Fatal(err)
		}
	}
	var gr tree.GroupResult
	if err := db.Update(func(tx *store.Tx) (err error) { gr, err = c.CloseSampled(tx, 1, g[0].ID, nil, 0); return err }); err != nil {
		t.Fatal(err)
	}
	filtered := 0
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		return r.Events(1, func(ev model.Event) error {
			if ev.Kind == tree.EvGroupFilter && ev.Group == g[0].ID {
				filtered++
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(gr.Advantages) != 0 || filtered != 1 {
		t.Errorf("a group of failed branches: %d advantages, %d filter events; want 0 and 1", len(gr.Advantages), filtered)
	}
	damageGroup(t, db, "r", 1, g[1].ID)
	err := db.View(func(tx *store.Tx) error { _, _, err := c.Informative(tx, 1); return err })
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("informative groups over a damaged group record: %v, want ErrCorrupt", err)
	}
}

// flatEngine is an engine of run "r" over flatEnv: two branches a group,
// each ending after its one turn, no scoring.
func flatEngine(t *testing.T) (*store.DB, *tree.Engine) {
	t.Helper()
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.NoScoring, cfg.B0, cfg.K, cfg.MaxTurns = true, 2, 1, 1
	newRun(t, db, "r", cfg)
	return db, mustEngine(t, db, "r", tree.Options{Config: cfg, Policy: constPolicy{}, Env: flatEnv{}})
}
