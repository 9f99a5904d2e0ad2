package server

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// Agent RL over HTTP: long tool calls under heartbeats, rewards and
// process scores from other processes, versions.

// slowFirstEnv is the fake agent whose first step of each episode is a
// tool call of the given length.
type slowFirstEnv struct{ wait time.Duration }

type slowFirstEpisode struct {
	fakeEpisode
	wait  time.Duration
	first bool
}

func (e slowFirstEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	return &slowFirstEpisode{wait: e.wait, first: true}, nil
}

func (e slowFirstEnv) Restore(context.Context, rollout.Task, []model.Turn, []byte) (rollout.Episode, error) {
	return &slowFirstEpisode{wait: e.wait, first: true}, nil
}

func (ep *slowFirstEpisode) Step(ctx context.Context, k rollout.TurnKey, m rollout.Move) (rollout.Observation, error) {
	if ep.first {
		ep.first = false
		time.Sleep(ep.wait)
	}
	return ep.fakeEpisode.Step(ctx, k, m)
}

// TestHeartbeatsCarryALongToolCall: a tool call of more than three lease
// TTLs under a worker's heartbeats: nobody else is handed the branch
// meanwhile, and the interval commits.
func TestHeartbeatsCarryALongToolCall(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":1,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":2}`)
	e.post("/api/v1/runs/r1/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: fakeTasks(1)}, http.StatusOK, nil)
	w := fakeWorker(e, "r1", "slow", 1)
	w.Env, w.TTL = slowFirstEnv{wait: time.Second}, 300*time.Millisecond
	var stolen atomic.Int32
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	type result struct {
		st  client.WorkStats
		err error
	}
	worked := make(chan result, 1)
	go func() {
		// Without heartbeats the branch would change hands forever.
		wctx, wcancel := context.WithTimeout(bg, 20*time.Second)
		defer wcancel()
		st, err := w.Work(wctx, 1)
		worked <- result{st, err}
	}()
	for { // once the slow worker holds the branch, another asks for work all the while
		if s, err := e.c.StepStatus(bg, "r1", 1); err == nil && (s.Leased == 1 || s.Active == 0) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	go func() {
		for ctx.Err() == nil {
			ls, err := e.c.Lease(ctx, "r1", api.LeaseRequest{Worker: "thief", Step: 1, TTLMs: 1})
			if err == nil {
				stolen.Add(int32(len(ls)))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res := <-worked
	st, err := res.st, res.err
	cancel()
	if err != nil {
		t.Fatalf("%v after %+v; the other worker was handed %d branches", err, st, stolen.Load())
	}
	if st.Lost != 0 || st.Turns != 2 || stolen.Load() != 0 {
		t.Fatalf("worker %+v; the other worker was handed %d branches", st, stolen.Load())
	}
	closeDone(t, e.c, "r1", 1)
}

// TestVerifierOverHTTP: workers that defer their rewards and leave
// scoring to a remote process reward model, and a Verifier serving both
// from another process, grow exactly the trees — scores, decisions,
// rewards, advantages — that workers scoring and rewarding inline grow.
func TestVerifierOverHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	conf := `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3,"repeat_prune":2,"max_turns":6%s}`
	createRun(e, "inline", fmt.Sprintf(conf, ""))
	growStep(e, "inline", 1, fakeTasks(4), 2)
	createRun(e, "remote", fmt.Sprintf(conf, `,"remote_scores":true`))
	e.post("/api/v1/runs/remote/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: fakeTasks(4)}, http.StatusOK, nil)
	v := &client.Verifier{Client: e.c, Run: "remote", Poll: 5 * time.Millisecond,
		Reward: func(_ context.Context, _ rollout.Task, path []model.Turn) (float64, error) {
			sum := 0.0
			for _, t := range path {
				sum += t.Reward
			}
			return sum, nil
		},
		Score: func(ctx context.Context, task rollout.Task, path []model.Turn) (float64, error) {
			return fakeScorer{}.Score(ctx, task, path)
		}}
	served := make(chan error, 1)
	var vs client.VerifyStats
	go func() {
		var err error
		vs, err = v.Serve(bg, 1)
		served <- err
	}()
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			w := fakeWorker(e, "remote", fmt.Sprint("w", i), 8)
			w.Scorer, w.DeferRewards = nil, true
			_, err := w.Work(bg, 1)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if vs.Rewards == 0 || vs.Scores == 0 {
		t.Fatalf("the verifier delivered %+v", vs)
	}
	closeDone(t, e.c, "remote", 1)
	want, got := canonicalStep(t, e.db, "inline", 1), canonicalStep(t, e.db, "remote", 1)
	if got != want {
		t.Fatalf("remote rewards and scores grew other trees: %s", firstDiff(got, want))
	}
}

// TestAsyncRefusals: the new endpoints' bad input is a 4xx and writes
// nothing.
func TestAsyncRefusals(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":4,"max_staleness":0}`)
	openStep(e, "r1", 1)
	e.post("/api/v1/runs/r1/version", `{"client_key":"v2","version":2}`, http.StatusOK, nil)
	before := e.fileSum()
	for _, c := range []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"renew without a worker", "/api/v1/runs/r1/leases/renew", `{"leases":["x"]}`, 400, "bad_request"},
		{"release without a worker", "/api/v1/runs/r1/leases/release", `{"leases":["x"]}`, 400, "bad_request"},
		{"lease without a worker", "/api/v1/runs/r1/leases", `{"step":1}`, 400, "invalid"},
		{"ttl_ms past the bound", "/api/v1/runs/r1/leases", `{"worker":"w","ttl_ms":9223372036854775807}`, 400, "bad_request"},
		{"a stale worker", "/api/v1/runs/r1/leases", `{"worker":"w","policy_version":1}`, 409, "stale"},
		{"a version not ahead", "/api/v1/runs/r1/version", `{"client_key":"v1","version":1}`, 400, "invalid"},
		{"no rewards", "/api/v1/runs/r1/rewards", `{"client_key":"k"}`, 400, "bad_request"},
		{"a reward nobody awaits", "/api/v1/runs/r1/rewards", `{"client_key":"k","rewards":[{"node":1,"reward":1}]}`, 409, "not_pending"},
		{"a score too early", "/api/v1/runs/r1/scores", `{"client_key":"k","scores":[{"node":1,"interval":0,"score":0.5}]}`, 409, "too_early"},
		{"a reward of an unknown node", "/api/v1/runs/r1/rewards", `{"client_key":"k","rewards":[{"node":99,"reward":1}]}`, 404, "not_found"},
	} {
		st, _, body := e.call(http.MethodPost, c.path, c.body)
		if st != c.status || !containsCode(body, c.code) {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, body, c.status, c.code)
		}
	}
	if st, _, body := e.call(http.MethodGet, "/api/v1/runs/r1/steps/1/pending?history=yes", nil); st != 400 {
		t.Errorf("pending?history=yes: %d %s", st, body)
	}
	if e.fileSum() != before {
		t.Error("a refused request changed the file")
	}
	var renewed api.LeasesResponse
	e.post("/api/v1/runs/r1/leases/renew", api.LeasesRequest{Worker: "w", Leases: []string{"nope"}}, http.StatusOK, &renewed)
	if len(renewed.Leases) != 1 || renewed.Leases[0].Held || renewed.Leases[0].Reason == "" {
		t.Errorf("renewing an unknown lease: %+v", renewed)
	}
}

func containsCode(body []byte, code string) bool {
	var eb api.ErrorBody
	return jsonUnmarshal(body, &eb) == nil && eb.Code == code
}

// TestLeaseSkipsHeldPaths: a worker that says which paths it holds gets,
// for a survivor and for the children forked from a branch it grew, only
// the turns past them — and the path it rebuilds is the branch's.
func TestLeaseSkipsHeldPaths(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6}`)
	openStep(e, "r1", 1)
	ls, err := e.c.Lease(bg, "r1", api.LeaseRequest{Worker: "w", Step: 1})
	if err != nil || len(ls) != 2 {
		t.Fatalf("%v %v", ls, err)
	}
	paths := map[uint64][]model.Turn{}
	var subs []rollout.Submission
	for i, l := range ls {
		turns := []model.Turn{turn(fmt.Sprint("a", i), 0), turn(fmt.Sprint("b", i), 0)}
		subs = append(subs, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: turns, Score: ptr([]float64{0.9, 0.8}[i])})
		paths[l.Node] = turns
	}
	if _, err := e.c.Submit(bg, "r1", api.SubmitRequest{Keyed: api.Keyed{ClientKey: "s"}, Submissions: subs}); err != nil {
		t.Fatal(err)
	}
	var have []api.HeldPath
	for n, p := range paths {
		have = append(have, api.HeldPath{Node: n, PathLen: len(p)})
	}
	next, err := e.c.Lease(bg, "r1", api.LeaseRequest{Worker: "w", Step: 1, Have: have})
	if err != nil || len(next) != 3 { // the survivor and the first root's two children
		t.Fatalf("%+v %v", next, err)
	}
	for _, g := range next {
		if g.HistoryOf == 0 || len(g.History) != 0 {
			t.Errorf("lease of node %d: history of %d from %d, %d turns sent; want none sent", g.Node, g.HistoryOf, g.HistoryFrom, len(g.History))
			continue
		}
		rebuilt := append(paths[g.HistoryOf][:g.HistoryFrom:g.HistoryFrom], g.History...)
		tr, err := e.c.Trajectory(bg, "r1", g.Node)
		if err != nil {
			t.Fatal(err)
		}
		if len(rebuilt) != len(tr.Turns) || len(rebuilt) != g.PathLen {
			t.Fatalf("node %d: rebuilt %d turns, its path has %d (lease path_len %d)", g.Node, len(rebuilt), len(tr.Turns), g.PathLen)
		}
		for i := range rebuilt {
			if rebuilt[i].Action != tr.Turns[i].Action {
				t.Errorf("node %d turn %d: rebuilt %q, stored %q", g.Node, i, rebuilt[i].Action, tr.Turns[i].Action)
			}
		}
	}
	st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Have: make([]api.HeldPath, api.MaxHave+1)})
	if st != http.StatusBadRequest {
		t.Errorf("have over its bound: %d %s", st, body)
	}
}
