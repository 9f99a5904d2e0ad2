package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// The fakes below are a tiny deterministic agent: every turn is a function
// of its TurnKey's Branch and Path (never of a node id, which depends on
// timing), and every score a function of the history. The Python example
// worker (clients/python/examples/toy_worker.py) computes exactly the same
// numbers, so Go and Python workers grow the same trees.

func branchHash(k rollout.TurnKey) uint64 { return k.Branch % 1000003 }

type fakePolicy struct {
	mu              sync.Mutex // batches may be asked for concurrently
	calls, maxBatch int
}

func (p *fakePolicy) ActBatch(_ context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	p.mu.Lock()
	p.calls++
	p.maxBatch = max(p.maxBatch, len(reqs))
	p.mu.Unlock()
	out := make([]rollout.Move, len(reqs))
	for i, r := range reqs {
		h := branchHash(r.Key)
		out[i] = rollout.Move{Text: fmt.Sprintf("a%d", (h+3*uint64(r.Key.Path))%4),
			Tokens: []uint32{uint32(r.Key.Path), uint32(h % 1000), 7}, Logprobs: []float32{-0.5, -0.25, -1}}
	}
	return out, nil
}

type fakeEnv struct{}

func (fakeEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	return fakeEpisode{}, nil
}
func (fakeEnv) Restore(context.Context, rollout.Task, []model.Turn, []byte) (rollout.Episode, error) {
	return fakeEpisode{}, nil
}

type fakeEpisode struct{}

func (fakeEpisode) State() []byte { return nil }
func (fakeEpisode) Step(_ context.Context, k rollout.TurnKey, m rollout.Move) (rollout.Observation, error) {
	obs := rollout.Observation{Text: fmt.Sprintf("o%s@%d", m.Text, k.Path), Done: (branchHash(k)+uint64(k.Path))%5 == 4}
	if m.Text == "a0" {
		obs.Reward = 0.25
	}
	return obs, nil
}

type fakeScorer struct{}

func (fakeScorer) Score(_ context.Context, _ rollout.Task, h []model.Turn) (float64, error) {
	n := len(h)
	for _, t := range h {
		for _, tok := range t.ActionTokens {
			n += int(tok)
		}
	}
	return float64(n%11) / 10, nil
}

// fakeTasks are the tasks of a step of the fake agent.
func fakeTasks(n int) []rollout.Task {
	out := make([]rollout.Task, n)
	for i := range out {
		out[i] = rollout.Task{ID: fmt.Sprintf("task-%d", i), Prompt: fmt.Sprintf("reach cell %d", i)}
	}
	return out
}

// fakeWorker is a Worker over e's server with the fake agent.
func fakeWorker(e *testEnv, run, name string, max int) *client.Worker {
	return &client.Worker{Client: e.c, Run: run, Name: name, Policy: &fakePolicy{}, Env: fakeEnv{}, Scorer: fakeScorer{},
		Max: max, Poll: 5 * time.Millisecond}
}

// growStep opens step with tasks, grows it with workers goroutines of the
// fake agent, and closes its groups.
func growStep(e *testEnv, run string, step uint64, tasks []rollout.Task, workers int) {
	e.t.Helper()
	e.post("/api/v1/runs/"+run+"/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: fmt.Sprintf("%s-open-%d", run, step)}, Step: step, Tasks: tasks}, http.StatusOK, nil)
	errs := make(chan error, workers)
	for i := range workers {
		go func() {
			_, err := fakeWorker(e, run, fmt.Sprint("w", i), 3).Work(bg, step)
			errs <- err
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			e.t.Fatal(err)
		}
	}
	closeDone(e.t, e.c, run, step)
}

// closeDone closes every done group of step and requires the step finished.
func closeDone(t testing.TB, c *client.Client, run string, step uint64) {
	t.Helper()
	st, err := c.StepStatus(bg, run, step)
	if err != nil {
		t.Fatal(err)
	}
	if st.Active != 0 || len(st.Done) != st.Open {
		t.Fatalf("step %d not done: %+v", step, st)
	}
	for _, g := range st.Done {
		if _, err := c.CloseGroup(bg, run, g, api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: fmt.Sprintf("%s-close-%d", run, g)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// slowTools makes one env step in eight of the fake agent a tool call of
// 0–2 s, drawn from the TurnKey (the turn itself is the fake's).
type slowTools struct{ fakeEnv }

type slowToolsEpisode struct{ fakeEpisode }

func (slowTools) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	return slowToolsEpisode{}, nil
}
func (slowTools) Restore(context.Context, rollout.Task, []model.Turn, []byte) (rollout.Episode, error) {
	return slowToolsEpisode{}, nil
}

func (ep slowToolsEpisode) Step(ctx context.Context, k rollout.TurnKey, m rollout.Move) (rollout.Observation, error) {
	if h := k.Branch*31 + uint64(k.Path); h%8 == 0 {
		t := time.NewTimer(time.Duration(h/8%2000) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return rollout.Observation{}, ctx.Err()
		case <-t.C:
		}
	}
	return ep.fakeEpisode.Step(ctx, k, m)
}

// pathReward is the fake agent's outcome reward as a verifier computes it
// apart from the worker: what the coordinator records inline, the sum of
// the path's turn rewards.
func pathReward(_ context.Context, _ rollout.Task, path []model.Turn) (float64, error) {
	sum := 0.0
	for _, t := range path {
		sum += t.Reward
	}
	return sum, nil
}
