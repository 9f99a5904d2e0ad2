package tree_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// Deferred rewards and remote scores: a verifier and a process reward
// model in another goroutine (as they would be in another process),
// delivering late.

// grader serves a step's pending work from outside the engine: every
// pending score is hashScore of the branch's path, every pending reward
// the sum of its turn rewards (what the engine records inline). Its first
// delivery comes delay after it first found work, the rest as soon as
// they are found.
type grader struct {
	c       *tree.Coordinator
	step    uint64
	delay   time.Duration
	delayed bool

	mu      sync.Mutex
	scores  int
	rewards int
}

func (g *grader) serve(ctx context.Context) error {
	db := g.c.DB()
	for ctx.Err() == nil {
		var p rollout.Pending
		paths := map[uint64][]model.Turn{}
		if err := db.View(func(tx *store.Tx) (err error) {
			if p, err = g.c.Pending(tx, g.step); err != nil {
				return err
			}
			r, _ := tx.Run(g.c.Run())
			for _, w := range append(p.Scores, p.Rewards...) {
				path, err := r.Trajectory(w.Node)
				if err != nil {
					return err
				}
				for _, pt := range path {
					paths[w.Node] = append(paths[w.Node], pt.Turn)
				}
			}
			return nil
		}); err != nil {
			return err
		}
		if len(p.Scores)+len(p.Rewards) == 0 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if !g.delayed {
			g.delayed = true
			time.Sleep(g.delay)
		}
		var ss []rollout.ScoreSubmission
		for _, w := range p.Scores {
			ss = append(ss, rollout.ScoreSubmission{Node: w.Node, Interval: w.Interval, Score: ptr(hashScore(w.Task, paths[w.Node]))})
		}
		var rs []rollout.RewardSubmission
		for _, w := range p.Rewards {
			sum := 0.0
			for _, t := range paths[w.Node] {
				sum += t.Reward
			}
			rs = append(rs, rollout.RewardSubmission{Node: w.Node, Reward: ptr(sum)})
		}
		if err := db.Update(func(tx *store.Tx) error {
			if len(ss) > 0 {
				if _, err := g.c.SubmitScores(tx, ss); err != nil {
					return err
				}
			}
			if len(rs) > 0 {
				_, err := g.c.SubmitRewards(tx, rs)
				return err
			}
			return nil
		}); err != nil {
			return err
		}
		g.mu.Lock()
		g.scores += len(ss)
		g.rewards += len(rs)
		g.mu.Unlock()
	}
	return nil
}

// deferredRun grows one step with rewards deferred and/or scores remote,
// served by a grader delivering after delay, and returns its canonical
// trees and what the grader delivered.
func deferredRun(t *testing.T, db *store.DB, run string, cfg tree.Config, deferRewards bool, delay time.Duration) ([]string, int, int) {
	t.Helper()
	newRun(t, db, run, cfg)
	o := hashOpts(cfg, tree.CommitInterval, false, nil)
	o.Policy, o.Env, o.Barrier = byBranch{o.Policy}, byBranchEnv{o.Env}, tree.BarrierGroup
	o.DeferRewards, o.Poll = deferRewards, time.Millisecond
	if cfg.RemoteScores {
		o.Scorer = nil
	}
	e := mustEngine(t, db, run, o)
	ctx, cancel := context.WithCancel(context.Background())
	g := &grader{c: e.Coordinator(), step: 1, delay: delay}
	served := make(chan error, 1)
	go func() { served <- g.serve(ctx) }()
	_, err := e.Rollout(context.Background(), 1, tasks(3))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("grader: %v", err)
	}
	return canonical(t, db, run), g.scores, g.rewards
}

func inlineRun(t *testing.T, db *store.DB, run string, cfg tree.Config) []string {
	t.Helper()
	newRun(t, db, run, cfg)
	o := hashOpts(cfg, tree.CommitInterval, false, nil)
	o.Policy, o.Env, o.Barrier = byBranch{o.Policy}, byBranchEnv{o.Env}, tree.BarrierGroup
	if _, err := mustEngine(t, db, run, o).Rollout(context.Background(), 1, tasks(3)); err != nil {
		t.Fatal(err)
	}
	return canonical(t, db, run)
}

// TestDeferredRewardsEqualInline: leaves whose rewards a verifier delivers
// 5 s after they ended close their groups with exactly the rewards and
// advantages of the run whose rewards came with the last turn.
func TestDeferredRewardsEqualInline(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 8, 21
	want := inlineRun(t, db, "inline", cfg)
	got, _, rewards := deferredRun(t, db, "deferred", cfg, true, 5*time.Second)
	if rewards == 0 {
		t.Fatal("no reward was deferred")
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("deferred rewards grew other trees or advantages:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestRemoteScoresRouteAsInline: process scores delivered apart from the
// turns, late, by a remote scorer route every group exactly as the
// workers' own scores do.
func TestRemoteScoresRouteAsInline(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 8, 22
	want := inlineRun(t, db, "inline", cfg)
	cfg.RemoteScores = true
	got, scores, _ := deferredRun(t, db, "remote", cfg, false, 20*time.Millisecond)
	if scores == 0 {
		t.Fatal("no score was delivered remotely")
	}
	// The recorded config differs (remote_scores); the trees must not.
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("remote scores routed other trees:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

// TestPendingTTLFailsNeverZero: a leaf whose reward never comes is
// recorded failed when its wait passes the run's pending TTL — not given
// a reward of 0 — and its group closes without it; a remote score that
// never comes fails its branch for a retry, with a fresh wait.
func TestPendingTTLFailsNeverZero(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns, cfg.PendingTTLMs = 2, 2, 4, 60_000
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := coordinator(t, db, "r", cfg, &tree.CoordinatorOptions{LeaseTTL: time.Hour, Now: clk.now})
	openStep(t, c, 1, tasks(1))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w"})
	done := []model.Turn{{Action: "x", Observation: "end", Reward: 1, Done: true}}
	if _, err := submit(c,
		rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, Turns: done, RewardPending: true},
		rollout.Submission{Lease: ls[1].ID, Worker: "w", Node: ls[1].Node, Turns: done, Reward: ptr(0.5)}); err != nil {
		t.Fatal(err)
	}
	status := func() (st rollout.StepStatus) {
		if err := db.View(func(tx *store.Tx) (err error) { st, err = c.Status(tx, 1); return err }); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st.AwaitingRewards != 1 || len(st.Done) != 0 {
		t.Fatalf("a leaf awaiting its reward: %+v, want the group held open", st)
	}
	if err := db.Update(func(tx *store.Tx) error { _, err := c.Close(tx, 1, 1, nil, 0); return err }); !errors.Is(err, rollout.ErrConflict) {
		t.Fatalf("closing a group whose leaf awaits its reward: %v, want ErrConflict", err)
	}
	clk.add(59 * time.Second)
	if c.Overdue() {
		t.Fatal("overdue before the pending TTL")
	}
	clk.add(2 * time.Second)
	if !c.Overdue() {
		t.Fatal("not overdue after the pending TTL")
	}
	var sub *rollout.Submitted
	if err := db.Update(func(tx *store.Tx) (err error) { sub, err = c.Expire(tx); return err }); err != nil {
		t.Fatal(err)
	}
	if len(sub.Results) != 1 || sub.Results[0].Status != model.NodeFailed || len(sub.Done) != 1 {
		t.Fatalf("expire: %+v, want the leaf failed and its group done", sub)
	}
	late := rollout.RewardSubmission{Node: ls[0].Node, Reward: ptr(1)}
	if err := db.Update(func(tx *store.Tx) error { _, err := c.SubmitRewards(tx, []rollout.RewardSubmission{late}); return err }); !errors.Is(err, rollout.ErrNotPending) {
		t.Fatalf("a reward after its TTL: %v, want ErrNotPending", err)
	}
	var gr tree.GroupResult
	if err := db.Update(func(tx *store.Tx) (err error) { gr, err = c.Close(tx, 1, 1, nil, 0); return err }); err != nil {
		t.Fatal(err)
	}
	if len(gr.Advantages) != 1 || gr.Advantages[0].Leaf != ls[1].Node {
		t.Fatalf("advantages %+v: want only the leaf with a reward", gr.Advantages)
	}
	var n model.Node
	_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run("r"); n, _ = r.Node(ls[0].Node); return nil })
	if n.Status != model.NodeFailed || n.HasReward || !strings.Contains(n.Error, "reward timed out") {
		t.Fatalf("the leaf whose reward never came: %+v", n)
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestDeferredRewardCompletesTheGroup: the reward that the last leaf of a
// group awaited is recorded on it, and its submission lists the group
// done, so the driver closes it without polling the step.
func TestDeferredRewardCompletesTheGroup(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 2, 2, 4
	c := coordinator(t, db, "r", cfg, nil)
	openStep(t, c, 1, tasks(1))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w"})
	done := []model.Turn{{Action: "x", Observation: "end", Reward: 1, Done: true}}
	if _, err := submit(c,
		rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, Turns: done, RewardPending: true},
		rollout.Submission{Lease: ls[1].ID, Worker: "w", Node: ls[1].Node, Turns: done, Reward: ptr(0.5)}); err != nil {
		t.Fatal(err)
	}
	var sub *rollout.Submitted
	if err := db.Update(func(tx *store.Tx) (err error) {
		sub, err = c.SubmitRewards(tx, []rollout.RewardSubmission{{Node: ls[0].Node, Reward: ptr(0.25)}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(sub.Results) != 1 || sub.Results[0].Node != ls[0].Node || len(sub.Done) != 1 || sub.Done[0] != ls[0].Group {
		t.Fatalf("the awaited reward: %+v, want its group %d done", sub, ls[0].Group)
	}
	var n model.Node
	_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run("r"); n, _ = r.Node(ls[0].Node); return nil })
	if !n.HasReward || n.Reward != 0.25 {
		t.Fatalf("the leaf after its reward: %+v", n)
	}
}

// TestDeferredRefusals: what is not pending is refused, and nothing is
// written.
func TestDeferredRefusals(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns, cfg.RemoteScores = 2, 2, 6, true
	c := coordinator(t, db, "r", cfg, nil)
	openStep(t, c, 1, tasks(1))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w"})
	if ls[0].Score {
		t.Fatalf("a lease asks a worker to score under remote scores: %+v", ls[0])
	}
	a, b := ls[0], ls[1]
	if _, err := submit(c, rollout.Submission{Lease: a.ID, Worker: "w", Node: a.Node, Turns: turnsN("a", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := submit(c, rollout.Submission{Lease: a.ID, Worker: "w", Node: a.Node, From: 1, Turns: turnsN("a", 1), Score: ptr(0.5)}); err != nil {
		// A worker may still score inline; the remote scorer then has nothing to do.
		t.Fatalf("an inline score under remote scores: %v", err)
	}
	before := dumpRun(t, db, "r")
	for name, c2 := range map[string]struct {
		want error
		fn   func(tx *store.Tx) error
	}{
		"score of a branch still sampling": {rollout.ErrTooEarly, func(tx *store.Tx) error {
			_, err := c.SubmitScores(tx, []rollout.ScoreSubmission{{Node: b.Node, Interval: 0, Score: ptr(0.5)}})
			return err
		}},
		"a second score": {rollout.ErrNotPending, func(tx *store.Tx) error {
			_, err := c.SubmitScores(tx, []rollout.ScoreSubmission{{Node: a.Node, Interval: 0, Score: ptr(0.5)}})
			return err
		}},
		"score for another interval": {rollout.ErrNotPending, func(tx *store.Tx) error {
			_, err := c.SubmitScores(tx, []rollout.ScoreSubmission{{Node: a.Node, Interval: 1, Score: ptr(0.5)}})
			return err
		}},
		"reward of an active branch": {rollout.ErrNotPending, func(tx *store.Tx) error {
			_, err := c.SubmitRewards(tx, []rollout.RewardSubmission{{Node: b.Node, Reward: ptr(1)}})
			return err
		}},
		"a reward and an error": {model.ErrInvalid, func(tx *store.Tx) error {
			_, err := c.SubmitRewards(tx, []rollout.RewardSubmission{{Node: b.Node, Reward: ptr(1), Error: "x"}})
			return err
		}},
	} {
		if err := db.Update(c2.fn); !errors.Is(err, c2.want) {
			t.Errorf("%s: %v, want %v", name, err, c2.want)
		}
		if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
			t.Errorf("%s wrote: %s", name, d)
		}
	}
	if _, err := submit(c, rollout.Submission{Lease: b.ID, Worker: "w", Node: b.Node, Turns: turnsN("b", 2)}); err != nil {
		t.Fatal(err)
	}
	before = dumpRun(t, db, "r")
	if err := db.Update(func(tx *store.Tx) error {
		_, err := c.SubmitScores(tx, []rollout.ScoreSubmission{{Node: b.Node, Interval: 0, Score: ptr(1.5)}})
		return err
	}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("score out of range: %v, want ErrInvalid", err)
	}
	if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
		t.Errorf("an out-of-range score wrote: %s", d)
	}
	var p rollout.Pending
	_ = db.View(func(tx *store.Tx) (err error) { p, err = c.Pending(tx, 1); return err })
	if len(p.Scores) != 1 || p.Scores[0].Node != b.Node || len(p.Rewards) != 0 {
		t.Fatalf("pending %+v: want node %d's score", p, b.Node)
	}
}

// A pending listing over a damaged group record is ErrCorrupt, never the
// work of the groups before it alone.
func TestPendingOfADamagedStepFails(t *testing.T) {
	db := openUnchecked(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 1, 2, 4
	c := coordinator(t, db, "r", cfg, nil)
	groups := openStep(t, c, 1, tasks(2))
	for _, l := range lease(t, c, tree.LeaseRequest{Worker: "w"}) {
		s := rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, RewardPending: true,
			Turns: []model.Turn{{Action: "x", Observation: "end", Done: true}}}
		if _, err := submit(c, s); err != nil {
			t.Fatal(err)
		}
	}
	damageGroup(t, db, "r", 1, groups[1].ID)
	for _, step := range []uint64{1, 0} {
		err := db.View(func(tx *store.Tx) error { _, err := c.Pending(tx, step); return err })
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("pending of step %d with a damaged group record: %v, want ErrCorrupt", step, err)
		}
	}
}
