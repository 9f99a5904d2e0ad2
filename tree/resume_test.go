package tree_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// resumeCase is one way of running and interrupting rollouts.
type resumeCase struct {
	name     string
	cfg      tree.Config
	mode     tree.CommitMode
	stateful bool // the env records its state on the nodes and restores from it
	cancel   bool // interrupt by cancelling the context instead of failing a call
	shaper   bool
}

func resumeCases() []resumeCase {
	patr := tree.DefaultConfig()
	patr.B0, patr.K, patr.M, patr.TopExpand, patr.Delta, patr.RepeatPrune, patr.MaxTurns, patr.MaxActive, patr.Seed =
		3, 2, 2, 2, 0.375, 3, 9, 6, 11
	grpo := tree.DefaultConfig()
	grpo.NoScoring, grpo.B0, grpo.K, grpo.MaxTurns, grpo.Seed = true, 4, 2, 8, 3
	return []resumeCase{
		{"patr/interval/error", patr, tree.CommitInterval, false, false, true},
		{"patr/interval/cancel/stateful", patr, tree.CommitInterval, true, true, false},
		{"patr/turn/error/stateful", patr, tree.CommitTurn, true, false, true},
		{"patr/turn/cancel", patr, tree.CommitTurn, false, true, false},
		{"grpo/interval/error/stateful", grpo, tree.CommitInterval, true, false, false},
		{"grpo/turn/cancel", grpo, tree.CommitTurn, false, true, true},
	}
}

func (c resumeCase) opts(f *fault) tree.Options {
	o := hashOpts(c.cfg, c.mode, c.stateful, f)
	if c.shaper {
		o.Shaper = &fakeShaper{f: f, lambda: 0.25}
	}
	return o
}

// sweepPoints are the calls at which TestResumeEqualsUninterrupted
// interrupts a rollout of n calls: every one with PATRDB_FULL_SWEEP set
// (about 700 interrupted runs, ~30 s of CPU under -race), else about ten
// spread over the whole range, first and last included, shifted by the
// case index so that the cases together cover more residues.
func sweepPoints(n, shift int) []int {
	var out []int
	stride := 1
	if os.Getenv("PATRDB_FULL_SWEEP") == "" {
		stride = max(1, n/8)
	}
	for at := shift % stride; at < n; at += stride {
		out = append(out, at)
	}
	if len(out) > 0 && out[0] != 0 {
		out = append([]int{0}, out...)
	}
	if out[len(out)-1] != n-1 {
		out = append(out, n-1)
	}
	return out
}

// TestResumeEqualsUninterrupted interrupts a rollout at every call the
// fakes receive (policy, env reset/restore/step, scorer, shaper), by an
// error or by cancelling the context, resumes it with fresh fakes, and
// requires the run to equal an uninterrupted one record for record: node
// ids, parents, forks, statuses, turns, scores, decisions, rewards,
// advantages and the event log (times aside). storetest checks the file at
// the end.
func TestResumeEqualsUninterrupted(t *testing.T) {
	for ci, c := range resumeCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := storetest.Open(t)
			ts := tasks(2)
			newRun(t, db, "base", c.cfg)
			counter := &fault{at: -1}
			res, err := mustEngine(t, db, "base", c.opts(counter)).Rollout(context.Background(), 1, ts)
			if err != nil {
				t.Fatal(err)
			}
			want := dumpRun(t, db, "base")
			calls := counter.count()
			if turns := len(want.Nodes); turns == 0 || res.EnvSteps == 0 {
				t.Fatalf("baseline grew nothing: %+v", res)
			}
			for _, at := range sweepPoints(calls, ci) {
				run := fmt.Sprint("at-", at)
				newRun(t, db, run, c.cfg)
				ctx, cancel := context.WithCancel(context.Background())
				f := &fault{at: at, cancel: cancel, succeed: c.cancel}
				_, err := mustEngine(t, db, run, c.opts(f)).Rollout(ctx, 1, ts)
				cancel()
				if !f.fired {
					t.Fatalf("%s: the fault never fired (%d calls)", run, f.count())
				}
				switch {
				case err == nil && !c.cancel:
					t.Fatalf("%s: Rollout succeeded through an injected error", run)
				case err != nil && !errors.Is(err, errInjected) && !errors.Is(err, context.Canceled):
					t.Fatalf("%s: Rollout: %v", run, err)
				}
				// A cancellation after the last sampled turn may let the
				// rollout finish; then there is nothing to resume.
				_, rerr := mustEngine(t, db, run, c.opts(nil)).Resume(context.Background(), 1)
				if err == nil {
					if !errors.Is(rerr, tree.ErrNoOpenStep) {
						t.Fatalf("%s: Resume after a finished rollout: %v, want ErrNoOpenStep", run, rerr)
					}
				} else if rerr != nil {
					t.Fatalf("%s: Resume after %v: %v", run, err, rerr)
				}
				if d := diffDump(dumpRun(t, db, run), want); d != "" {
					t.Fatalf("%s (interrupted by %v): resumed run differs from the uninterrupted one: %s", run, err, d)
				}
			}
		})
	}
}

// TestResumeRepeatedly interrupts every few calls, resumes with the same
// kind of fault again and again until each of two steps finishes, and
// checks the result against an uninterrupted run and the tree invariants.
func TestResumeRepeatedly(t *testing.T) {
	for _, c := range resumeCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := storetest.Open(t)
			ts := tasks(2)
			newRun(t, db, "base", c.cfg)
			// The baseline measures the most calls between two commits: a
			// resume makes progress only when it gets through that many
			// plus a restore per active branch before its fault fires.
			counter := &fault{at: -1}
			o := c.opts(counter)
			gap, last := 0, 0
			o.OnInterval = func(uint64, int, int) { gap, last = max(gap, counter.count()-last), counter.count() }
			base := mustEngine(t, db, "base", o)
			var want []*tree.StepResult
			for step := uint64(1); step <= 2; step++ {
				res, err := base.Rollout(context.Background(), step, ts)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, res)
				gap, last = max(gap, counter.count()-last), counter.count()
			}
			wantDump := dumpRun(t, db, "base")
			restores := len(ts) * max(c.cfg.MaxActive, c.cfg.B0)
			everies := []int{gap + restores + 1}
			if os.Getenv("PATRDB_FULL_SWEEP") != "" {
				everies = append(everies, gap+restores+1+gap/3, gap+restores+5)
			}
			for _, every := range everies {
				run := fmt.Sprint("every-", every)
				newRun(t, db, run, c.cfg)
				interruptions := 0
				for step := uint64(1); step <= 2; step++ {
					var err error
					for attempt := 0; ; attempt++ {
						if attempt > 200 {
							t.Fatalf("%s step %d: no progress after %d resumes", run, step, attempt)
						}
						ctx, cancel := context.WithCancel(context.Background())
						f := &fault{at: every, cancel: cancel, succeed: c.cancel}
						e := mustEngine(t, db, run, c.opts(f))
						if attempt == 0 {
							_, err = e.Rollout(ctx, step, ts)
						} else {
							_, err = e.Resume(ctx, step)
						}
						cancel()
						if err == nil {
							break
						}
						if !errors.Is(err, errInjected) && !errors.Is(err, context.Canceled) {
							t.Fatalf("%s step %d attempt %d: %v", run, step, attempt, err)
						}
						interruptions++
					}
					if open, err := mustEngine(t, db, run, c.opts(nil)).OpenStep(); err != nil || open != 0 {
						t.Fatalf("%s: open step %d (%v) after step %d finished", run, open, err, step)
					}
				}
				if interruptions < 2 {
					t.Errorf("%s: only %d interruptions; the test is not testing resume", run, interruptions)
				}
				if d := diffDump(dumpRun(t, db, run), wantDump); d != "" {
					t.Fatalf("%s (%d interruptions): differs from the uninterrupted run: %s", run, interruptions, d)
				}
			}
			if !c.shaper {
				for i, res := range want {
					checkStep(t, db, "base", c.cfg, uint64(i+1), len(ts), res, coverage{})
				}
			}
		})
	}
}

// TestResumeNothingOpen: Resume on a run with no open group is
// ErrNoOpenStep, before any rollout and after a finished one.
func TestResumeNothingOpen(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	newRun(t, db, "r", cfg)
	e := mustEngine(t, db, "r", hashOpts(cfg, tree.CommitInterval, false, nil))
	if _, err := e.Resume(context.Background(), 1); !errors.Is(err, tree.ErrNoOpenStep) {
		t.Errorf("Resume of an empty run: %v, want ErrNoOpenStep", err)
	}
	if _, err := e.Rollout(context.Background(), 1, tasks(2)); err != nil {
		t.Fatal(err)
	}
	before := dumpRun(t, db, "r")
	if _, err := e.Resume(context.Background(), 1); !errors.Is(err, tree.ErrNoOpenStep) {
		t.Errorf("Resume of a finished step: %v, want ErrNoOpenStep", err)
	}
	if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
		t.Errorf("Resume with nothing open changed the run: %s", d)
	}
}

// TestResumeClosesGroups: a crash after every branch is settled at the
// interval level but before the groups' close transactions (the shaper's
// Prepare fails once) leaves open groups with an empty frontier; Resume
// closes them, writing what an uninterrupted run writes.
func TestResumeClosesGroups(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 8, 4
	ts := tasks(3)
	opts := func(f *fault) tree.Options {
		o := hashOpts(cfg, tree.CommitInterval, true, nil)
		o.Shaper = &fakeShaper{f: f, lambda: 0.5}
		return o
	}
	newRun(t, db, "base", cfg)
	if _, err := mustEngine(t, db, "base", opts(nil)).Rollout(context.Background(), 1, ts); err != nil {
		t.Fatal(err)
	}
	want := dumpRun(t, db, "base")

	// The shaper's calls are BeginStep, then one Prepare per group; failing
	// the last Prepare crashes after every other group has closed and every
	// branch is settled. Failing an earlier one leaves more to resume.
	for at := 1; at <= len(ts); at++ {
		run := fmt.Sprint("prepare-", at)
		newRun(t, db, run, cfg)
		_, err := mustEngine(t, db, run, opts(&fault{at: at})).Rollout(context.Background(), 1, ts)
		if !errors.Is(err, errInjected) {
			t.Fatalf("%s: Rollout: %v, want the injected Prepare failure", run, err)
		}
		got := dumpRun(t, db, run)
		open := 0
		for _, g := range got.Groups {
			if g.Status == model.GroupOpen {
				open++
			}
		}
		if at == len(ts) && (open != 1 || len(got.Frontier) != 0) {
			t.Fatalf("%s: %d open groups, frontier %v; want one open group and no active branch", run, open, got.Frontier)
		}
		for _, a := range got.Adv {
			if g := got.Groups[a.Group-1]; g.Status != model.GroupClosed {
				t.Errorf("%s: advantage %+v written for open group %d", run, a, g.ID)
			}
		}
		if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
			t.Fatalf("%s: check after the failed close: %v %v", run, vs, err)
		}
		sh := &fakeShaper{lambda: 0.5}
		o := opts(nil)
		o.Shaper = sh
		res, err := mustEngine(t, db, run, o).Resume(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Groups) != open || len(sh.begun) != 1 || sh.begun[0] != 1 {
			t.Errorf("%s: Resume closed %d groups, shaper began %v; want %d groups, step 1", run, len(res.Groups), sh.begun, open)
		}
		if at == len(ts) && res.EnvSteps != 0 {
			t.Errorf("%s: Resume sampled %d turns with nothing active", run, res.EnvSteps)
		}
		if d := diffDump(dumpRun(t, db, run), want); d != "" {
			t.Errorf("%s: resumed close differs from the uninterrupted run: %s", run, d)
		}
	}
}
