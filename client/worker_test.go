package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

const workerTree = `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6}`

// peek reads a request's body and puts it back for the handler.
func peek(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// A worker grows a step until no branch is active, every turn it counts
// is in the file, and it never holds more branches than its Max: each
// lease request asks for its free slots only (0 would mean every branch
// available). With EachTurn every turn is its own submit. The paths it
// says it holds (so the server sends only what is new) are bounded at
// 4 Max, the oldest forgotten first.
func TestWorkerGrowsAStep(t *testing.T) {
	for _, eachTurn := range []bool{false, true} {
		t.Run(fmt.Sprint("EachTurn=", eachTurn), func(t *testing.T) {
			var mu sync.Mutex
			var asked []int
			mostHeld := 0
			s := serve(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/leases") {
						var lr api.LeaseRequest
						_ = json.Unmarshal(peek(r), &lr)
						mu.Lock()
						asked = append(asked, lr.Max)
						mostHeld = max(mostHeld, len(lr.Have))
						mu.Unlock()
					}
					h.ServeHTTP(w, r)
				})
			})
			s.createRun("r", workerTree)
			s.openStep("r", 1, 3)
			w := s.worker("r", "w", 2)
			w.EachTurn = eachTurn
			most, submits := 0, 0 // turns in one submission, submits acknowledged
			w.OnSubmit = func(req api.SubmitRequest, _ rollout.Submitted) {
				mu.Lock()
				defer mu.Unlock()
				submits++
				for _, sub := range req.Submissions {
					most = max(most, len(sub.Turns))
				}
			}
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			defer cancel()
			st, err := w.Work(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			status, err := s.c.StepStatus(bg, "r", 1)
			if err != nil || status.Active != 0 || len(status.Done) != 3 {
				t.Fatalf("after Work: %+v, %v; want no active branch and 3 groups done", status, err)
			}
			stored := s.turnsStored("r", 1)
			if st.Turns != stored || st.Turns == 0 {
				t.Errorf("the worker counted %d turns, the file holds %d", st.Turns, stored)
			}
			if want := map[bool]int{true: 1, false: 2}[eachTurn]; most != want {
				t.Errorf("a submission carried up to %d turns, want %d (K 2)", most, want)
			}
			if st.Lost != 0 || st.Submits != submits || st.Leases < 9 || st.PolicyCalls == 0 {
				t.Errorf("stats %+v: want 9 roots or more leased, the %d submits acknowledged, policy calls, nothing lost", st, submits)
			}
			mu.Lock()
			defer mu.Unlock()
			if mostHeld == 0 || mostHeld > 4*2 {
				t.Errorf("lease requests listed up to %d held paths, want some and at most 8 (4 Max)", mostHeld)
			}
			for _, n := range asked {
				if n < 1 || n > 2 {
					t.Fatalf("lease requests asked for %v branches, want 1 or 2 each (Max 2)", asked)
				}
			}
			s.closeDone("r", 1)
		})
	}
}

// blockingEnv is the fake agent whose first env step (of the whole test)
// blocks until its branch is stopped, saying when it started and ended.
type blockingEnv struct {
	entered, stopped chan struct{}
	once             sync.Once
	max              time.Duration // the longest it blocks
}

func newBlockingEnv(max time.Duration) *blockingEnv {
	return &blockingEnv{entered: make(chan struct{}), stopped: make(chan struct{}), max: max}
}

func (e *blockingEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	return blockingEpisode{e}, nil
}

func (e *blockingEnv) Restore(context.Context, rollout.Task, []model.Turn, []byte) (rollout.Episode, error) {
	return blockingEpisode{e}, nil
}

type blockingEpisode struct{ e *blockingEnv }

func (blockingEpisode) State() []byte { return nil }

func (ep blockingEpisode) Step(ctx context.Context, k rollout.TurnKey, m rollout.Move) (rollout.Observation, error) {
	first := false
	ep.e.once.Do(func() { first = true })
	if first {
		close(ep.e.entered)
		defer close(ep.e.stopped)
		select {
		case <-ctx.Done():
			return rollout.Observation{}, ctx.Err()
		case <-time.After(ep.e.max):
		}
	}
	return fakeEpisode{}.Step(ctx, k, m)
}

// A worker that stops (its context ends) gives its leases back at once:
// another worker is handed the branches without waiting out their TTL.
func TestWorkerReleasesItsLeasesWhenStopped(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	s.openStep("r", 1, 1)
	env := newBlockingEnv(time.Minute)
	w := s.worker("r", "w", 3)
	w.Env = env
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := w.Work(ctx, 1)
		done <- err
	}()
	select {
	case <-env.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never stepped a branch")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Work after its context ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Work did not return after its context ended")
	}
	ls, err := s.c.Lease(bg, "r", api.LeaseRequest{Worker: "other", Step: 1})
	if err != nil || len(ls) != 3 {
		t.Fatalf("another worker leased %d branches (%v), want the 3 the stopped worker held", len(ls), err)
	}
}

// While a tool call outlasts the lease's TTL, the heartbeat keeps the
// lease: the turn is accepted and nothing is lost.
func TestWorkerHeartbeatOutlivesTheTTL(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	s.openStep("r", 1, 1)
	w := s.worker("r", "w", 3)
	w.TTL = 300 * time.Millisecond
	w.Env = newBlockingEnv(1200 * time.Millisecond) // four TTLs
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	st, err := w.Work(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lost != 0 {
		t.Errorf("%d branches lost during a tool call the heartbeat should have covered", st.Lost)
	}
	if stored := s.turnsStored("r", 1); st.Turns != stored {
		t.Errorf("the worker counted %d turns, the file holds %d", st.Turns, stored)
	}
	s.closeDone("r", 1)
}

// A branch whose lease the server voided (a version published under
// on_publish abort) is stopped at the next heartbeat, its tool call
// cancelled, not run to the end for a submit that would be refused; the
// worker goes on with the branches leased again and finishes the step.
func TestWorkerStopsABranchWhoseLeaseIsGone(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", strings.TrimSuffix(workerTree, "}")+`,"on_publish":"abort"}`)
	s.openStep("r", 1, 1)
	env := newBlockingEnv(30 * time.Second)
	w := s.worker("r", "w", 3)
	w.TTL = time.Second // a heartbeat every 400 ms
	w.Env = env
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	type result struct {
		st  client.WorkStats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := w.Work(ctx, 1)
		done <- result{st, err}
	}()
	<-env.entered
	if _, err := s.c.Publish(bg, "r", api.PublishRequest{Version: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-env.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the branch's tool call ran on 10 s after its lease was voided")
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.st.Lost == 0 {
		t.Errorf("stats %+v: want the voided branches counted lost", res.st)
	}
	s.closeDone("r", 1)
}

// A submit refused because its lease is gone (voided while the policy
// sampled: the heartbeat had not said so yet) is sorted out branch by
// branch: the refused branches are dropped, the others' work is kept, and
// the worker finishes the step with the branches leased again.
func TestWorkerDropsWorkRefusedAtSubmit(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", strings.TrimSuffix(workerTree, "}")+`,"on_publish":"abort"}`)
	s.openStep("r", 1, 2)
	w := s.worker("r", "w", 3)
	var once sync.Once
	w.Policy = policyFunc(func(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
		once.Do(func() {
			// New weights land while the worker samples.
			if _, err := s.c.Publish(bg, "r", api.PublishRequest{Version: 1}); err != nil {
				t.Error(err)
			}
		})
		return (&fakePolicy{}).ActBatch(ctx, reqs)
	})
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	st, err := w.Work(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lost == 0 {
		t.Fatalf("no work was dropped: %+v", st)
	}
	if stored := s.turnsStored("r", 1); st.Turns != stored {
		t.Errorf("the worker counted %d turns, the file holds %d", st.Turns, stored)
	}
	s.closeDone("r", 1)
}

type policyFunc func(context.Context, []rollout.ActRequest) ([]rollout.Move, error)

func (f policyFunc) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	return f(ctx, reqs)
}

// A submit whose answer is lost (here: committed, then answered 503) is
// sent again under the same client key, so the server answers it from
// its first commit instead of writing twice; the retries come Poll apart,
// doubling, not seconds apart.
func TestWorkerRetriesASubmitUnderItsKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var at []time.Time
	s := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/submit") {
				h.ServeHTTP(w, r)
				return
			}
			k, _ := api.ReadSubmitFrame(peek(r), json.Unmarshal) // the worker's client sends frames
			mu.Lock()
			keys = append(keys, k.ClientKey)
			at = append(at, time.Now())
			n := len(keys)
			mu.Unlock()
			if n > 4 {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(httptest.NewRecorder(), r) // committed; the answer is lost
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"the answer was lost","code":"unavailable"}`))
		})
	})
	s.createRun("r", workerTree)
	s.openStep("r", 1, 1)
	w := s.worker("r", "w", 3)
	w.Poll = 10 * time.Millisecond
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	st, err := w.Work(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lost != 0 {
		t.Errorf("stats %+v: a retried submit lost work", st)
	}
	if stored := s.turnsStored("r", 1); st.Turns != stored {
		t.Errorf("the worker counted %d turns, the file holds %d", st.Turns, stored)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) < 5 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] || keys[3] != keys[0] || keys[4] != keys[0] {
		t.Fatalf("submit keys %q: want the first one sent five times", keys)
	}
	for i := 1; i < 5; i++ {
		if gap := at[i].Sub(at[i-1]); gap > time.Second {
			t.Errorf("retry %d came %v after the one before, want about 10 ms doubling (Poll 10 ms)", i, gap)
		}
	}
	s.closeDone("r", 1)
}

// A Worker with Max 0 holds up to 16 branches, not none.
func TestWorkerDefaultMax(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	s.openStep("r", 1, 1)
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	st, err := s.worker("r", "w", 0).Work(ctx, 1)
	if err != nil || st.Leases < 3 {
		t.Fatalf("Work with Max 0: %+v, %v", st, err)
	}
	s.closeDone("r", 1)
}

// A worker with room for more branches keeps asking for them while the
// ones it holds run their tools: a branch another worker gives back is
// taken within a poll, not when the worker's own long tool call ends.
func TestWorkerWithRoomTakesABranchGivenBack(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", `{"b0":2,"k":1,"max_turns":1,"no_scoring":true}`)
	s.openStep("r", 1, 1)
	other, err := s.c.Lease(bg, "r", api.LeaseRequest{Worker: "other", Max: 1, Step: 1})
	if err != nil || len(other) != 1 {
		t.Fatalf("other's lease: %v %v", other, err)
	}
	env := newBlockingEnv(20 * time.Second) // the first branch the worker steps: a long tool call
	w := s.worker("r", "w", 2)
	w.Env = env
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := w.Work(ctx, 1); done <- err }()
	select {
	case <-env.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never stepped its branch")
	}
	if _, err := s.c.ReleaseLeases(bg, "r", api.LeasesRequest{Worker: "other", Leases: []string{other[0].ID}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n := s.nodes("r", 1)[other[0].Node]; n.Turns > 0 {
			break // the given-back branch was taken and grown while the first still waits
		}
		select {
		case <-env.stopped:
			t.Fatal("the given-back branch waited for the worker's own tool call to end")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the given-back branch was not taken within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

// A Worker with nothing to lease asks again every Poll, 50 ms by default:
// it waits for work without hammering the server.
func TestWorkerDefaultPoll(t *testing.T) {
	var leases atomic.Int32
	s := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/leases") {
				leases.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	s.createRun("r", `{"b0":1,"k":1,"max_turns":1,"no_scoring":true}`)
	s.openStep("r", 1, 1)
	if other, err := s.c.Lease(bg, "r", api.LeaseRequest{Worker: "other", Max: 1, Step: 1}); err != nil || len(other) != 1 {
		t.Fatalf("other's lease: %v %v", other, err)
	}
	leases.Store(0)
	w := s.worker("r", "w", 1)
	w.Poll = 0
	ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
	defer cancel()
	if _, err := w.Work(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Work on a step with nothing to lease: %v, want it waiting until ctx ends", err)
	}
	if n := leases.Load(); n < 2 || n > 25 {
		t.Errorf("%d lease requests in 500 ms, want about 10 (one a 50 ms poll)", n)
	}
}
