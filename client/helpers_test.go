package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

var bg = context.Background()

// served is a real server over a fresh store: the client is tested against
// the API it speaks, not against a model of it. wrap, when not nil, sits in
// front of the server's handler (to watch or fail requests).
type served struct {
	t  *testing.T
	db *store.DB
	c  *client.Client
}

func serve(t *testing.T, wrap func(http.Handler) http.Handler) *served {
	t.Helper()
	db := storetest.Open(t)
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &served{t: t, db: db, c: client.New(srv.URL)}
}

// createRun creates run with tree config conf.
func (s *served) createRun(run, conf string) {
	s.t.Helper()
	if _, err := s.c.CreateRun(bg, api.CreateRunRequest{ID: run, Tree: []byte(conf)}); err != nil {
		s.t.Fatal(err)
	}
}

// openStep opens step of run with n tasks.
func (s *served) openStep(run string, step uint64, n int) []model.Group {
	s.t.Helper()
	tasks := make([]rollout.Task, n)
	for i := range tasks {
		tasks[i] = rollout.Task{ID: fmt.Sprintf("task-%d", i), Prompt: fmt.Sprintf("reach cell %d", i)}
	}
	out, err := s.c.OpenStep(bg, run, api.OpenStepRequest{Step: step, Tasks: tasks})
	if err != nil {
		s.t.Fatal(err)
	}
	return out.Groups
}

// nodes is every node of step's groups, by id.
func (s *served) nodes(run string, step uint64) map[uint64]model.Node {
	s.t.Helper()
	gs, err := s.c.Groups(bg, run, step)
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[uint64]model.Node{}
	for _, g := range gs {
		tr, err := s.c.Tree(bg, run, g.ID)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, n := range tr.Nodes {
			out[n.ID] = n
		}
	}
	return out
}

// turnsStored is how many turns step's nodes hold.
func (s *served) turnsStored(run string, step uint64) int {
	n := 0
	for _, nd := range s.nodes(run, step) {
		n += nd.Turns
	}
	return n
}

// worker is a Worker of the fake agent over s.
func (s *served) worker(run, name string, max int) *client.Worker {
	return &client.Worker{Client: s.c, Run: run, Name: name, Policy: &fakePolicy{}, Env: fakeEnv{}, Scorer: fakeScorer{},
		Max: max, Poll: 5 * time.Millisecond}
}

// The fake agent: every turn a function of its TurnKey (never of a node
// id, which depends on timing), every score a function of the path.

type fakePolicy struct {
	mu              sync.Mutex
	calls, maxBatch int
}

func (p *fakePolicy) ActBatch(_ context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	p.mu.Lock()
	p.calls++
	p.maxBatch = max(p.maxBatch, len(reqs))
	p.mu.Unlock()
	out := make([]rollout.Move, len(reqs))
	for i, r := range reqs {
		h := r.Key.Branch % 1000003
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
	obs := rollout.Observation{Text: fmt.Sprintf("o%s@%d", m.Text, k.Path), Done: (k.Branch%1000003+uint64(k.Path))%5 == 4}
	if m.Text == "a0" {
		obs.Reward = 0.25
	}
	return obs, nil
}

type fakeScorer struct{}

func (fakeScorer) Score(_ context.Context, _ rollout.Task, h []model.Turn) (float64, error) {
	return pathScore(h), nil
}

func pathScore(h []model.Turn) float64 {
	n := len(h)
	for _, t := range h {
		for _, tok := range t.ActionTokens {
			n += int(tok)
		}
	}
	return float64(n%11) / 10
}

// pathReward is the sum of the path's env rewards.
func pathReward(h []model.Turn) float64 {
	sum := 0.0
	for _, t := range h {
		sum += t.Reward
	}
	return sum
}

// closeDone closes every done group of step and requires the step
// finished.
func (s *served) closeDone(run string, step uint64) {
	s.t.Helper()
	st, err := s.c.StepStatus(bg, run, step)
	if err != nil {
		s.t.Fatal(err)
	}
	if st.Active != 0 || len(st.Done) != st.Open {
		s.t.Fatalf("step %d not done: %+v", step, st)
	}
	for _, g := range st.Done {
		if _, err := s.c.CloseGroup(bg, run, g, api.CloseGroupRequest{}); err != nil {
			s.t.Fatal(err)
		}
	}
}
