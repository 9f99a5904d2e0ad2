package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/tree"
)

// failingPolicy is the fake agent, except that it fails the branches of
// root ordinal 0 (whatever their node ids) and gives root ordinal 1 one
// logprob too many on its second turn.
type failingPolicy struct {
	fakePolicy
	failKey, badKey uint64
}

func (p *failingPolicy) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	moves, _ := p.fakePolicy.ActBatch(ctx, reqs)
	errs := rollout.ItemErrors{}
	for i, r := range reqs {
		switch {
		case r.Key.Branch == p.failKey:
			errs[i] = errors.New("out of memory")
		case r.Key.Branch == p.badKey && r.Key.Path == 1:
			moves[i].Logprobs = append(moves[i].Logprobs, -1)
		}
	}
	if len(errs) > 0 {
		return moves, errs
	}
	return moves, nil
}

// A failing branch is retried by the server and then recorded failed with
// its error; turns the store refuses fail their branch the same way; the
// rest of the group grows and closes.
func TestWorkerFailures(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.1,"max_turns":4}`)
	g := openStep(e, "r1", 1)
	// Lease once to learn the roots' branch keys, for 1 ms.
	var lr api.LeaseResponse
	e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "x", TTLMs: 1}, http.StatusOK, &lr)
	time.Sleep(5 * time.Millisecond)
	p := &failingPolicy{failKey: lr.Leases[0].Key.Branch, badKey: lr.Leases[1].Key.Branch}
	w := fakeWorker(e, "r1", "w", 8)
	w.Policy = p
	st, err := w.Work(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	closeDone(t, e.c, "r1", 1)
	var gt api.GroupTree
	e.get("/api/v1/runs/r1/groups/"+u64(g.ID), &gt)
	byID := map[uint64]model.Node{}
	for _, n := range gt.Nodes {
		byID[n.ID] = n
	}
	failed, bad := byID[g.Roots[0]], byID[g.Roots[1]]
	if failed.Status != model.NodeFailed || failed.Attempt != tree.DefaultMaxAttempts-1 || !strings.Contains(failed.Error, "out of memory") {
		t.Errorf("failing branch: %+v", failed)
	}
	if bad.Status != model.NodeFailed || !strings.Contains(bad.Error, "logprob") || bad.Turns != 0 {
		t.Errorf("branch with a refused turn: %+v", bad)
	}
	if gt.Group.Status != model.GroupClosed || st.Turns == 0 {
		t.Fatalf("group %+v after %+v", gt.Group, st)
	}
	var advs struct{ Advantages []model.Advantage }
	e.get("/api/v1/runs/r1/advantages?step=1", &advs)
	for _, a := range advs.Advantages {
		if a.Leaf == failed.ID || a.Leaf == bad.ID {
			t.Errorf("a failed branch got an advantage: %+v", a)
		}
	}
	if len(advs.Advantages) == 0 {
		t.Error("no advantages")
	}
}

// A worker whose leases are voided — a policy version published under
// on_publish abort — drops that work (its heartbeat or its submit says the
// leases are gone) and goes on with branches leased again.
func TestWorkerDropsLostLeases(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", strings.TrimSuffix(testTree, "}")+`,"on_publish":"abort"}`)
	openStep(e, "r1", 1)
	w := fakeWorker(e, "r1", "slow", 3)
	published := false
	w.Policy = policyFunc(func(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
		if !published {
			// New weights land while the worker samples.
			published = true
			e.post("/api/v1/runs/r1/version", `{"client_key":"v1","version":1}`, http.StatusOK, nil)
		}
		return (&fakePolicy{}).ActBatch(ctx, reqs)
	})
	st, err := w.Work(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lost == 0 {
		t.Fatalf("no work was dropped: %+v", st)
	}
	closeDone(t, e.c, "r1", 1)
}

type policyFunc func(context.Context, []rollout.ActRequest) ([]rollout.Move, error)

func (f policyFunc) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	return f(ctx, reqs)
}

// staggeredEnv is the fake agent whose n-th episode takes n×delay a step,
// so branches leased together finish apart.
type staggeredEnv struct {
	fakeEnv
	delay time.Duration
	mu    sync.Mutex
	n     int
}

type staggeredEpisode struct {
	fakeEpisode
	delay time.Duration
}

func (e *staggeredEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep := staggeredEpisode{delay: time.Duration(e.n) * e.delay}
	e.n++
	return ep, nil
}

func (ep staggeredEpisode) Step(ctx context.Context, k rollout.TurnKey, m rollout.Move) (rollout.Observation, error) {
	time.Sleep(ep.delay)
	return ep.fakeEpisode.Step(ctx, k, m)
}

// A worker's branches that finish within its linger go in one submit (one
// commit on the server); past it, each goes on its own.
func TestWorkerSubmitLingers(t *testing.T) {
	for _, c := range []struct {
		linger  time.Duration
		submits int
	}{{time.Minute, 1}, {time.Millisecond, 3}} {
		e := newEnv(t, Options{})
		createRun(e, "r1", `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.1,"max_turns":2}`)
		openStep(e, "r1", 1)
		w := fakeWorker(e, "r1", "w", 8)
		w.Env, w.Linger = &staggeredEnv{delay: 40 * time.Millisecond}, c.linger
		st, err := w.Work(bg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if st.Leases != 3 || st.Turns != 6 || st.Submits != c.submits {
			t.Errorf("linger %v: %+v, want 3 branches' 6 turns in %d submits", c.linger, st, c.submits)
		}
	}
}
