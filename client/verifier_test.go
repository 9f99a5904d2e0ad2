package client_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// verifiedReward is the fake reward model: a function of the path only.
func verifiedReward(_ context.Context, _ rollout.Task, path []model.Turn) (float64, error) {
	return float64(len(path)) + pathScore(path), nil
}

// Verifiers deliver every reward a worker deferred and every score of a
// remote-scores run: the step finishes with each leaf carrying the reward
// its path earns, each delivered once. Two verifiers serve the step
// together; what one delivered first is dropped by the other, never
// counted twice. A branch whose path could not be read (here: the first
// read of each fails) is not delivered then but at a later look, with its
// path, never computed over a path it does not have.
func TestVerifiersDeliverRewardsAndScores(t *testing.T) {
	var mu sync.Mutex
	failed := map[string]bool{}
	s := serve(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/trajectory") {
				mu.Lock()
				first := !failed[r.URL.Path]
				failed[r.URL.Path] = true
				mu.Unlock()
				if first {
					w.WriteHeader(http.StatusNotFound)
					w.Write([]byte(`{"error":"not yet","code":"not_found"}`))
					return
				}
			}
			h.ServeHTTP(w, r)
		})
	})
	s.createRun("r", `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6,"remote_scores":true}`)
	s.openStep("r", 1, 2)
	w := s.worker("r", "w", 4)
	w.Scorer, w.DeferRewards = nil, true
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()

	scored := 0
	score := func(_ context.Context, _ rollout.Task, path []model.Turn) (float64, error) {
		mu.Lock()
		scored++
		mu.Unlock()
		return pathScore(path), nil
	}
	reward := func(ctx context.Context, task rollout.Task, path []model.Turn) (float64, error) {
		if len(path) == 0 {
			t.Errorf("a reward asked of an empty path")
		}
		return verifiedReward(ctx, task, path)
	}
	stats := make([]client.VerifyStats, 2)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 2 {
		v := &client.Verifier{Client: s.c, Run: "r", Reward: reward, Score: score, Workers: 2, Poll: 5 * time.Millisecond}
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i], errs[i] = v.Serve(ctx, 1)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errs[2] = w.Work(ctx, 1)
	}()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("verifier/worker %d: %v", i, err)
		}
	}

	leaves := 0
	for id, n := range s.nodes("r", 1) {
		if n.Status != model.NodeCompleted && n.Status != model.NodeTruncated {
			continue
		}
		leaves++
		tr, err := s.c.Trajectory(bg, "r", id)
		if err != nil {
			t.Fatal(err)
		}
		path := make([]model.Turn, len(tr.Turns))
		for i := range tr.Turns {
			path[i] = tr.Turns[i].Turn
		}
		if want, _ := verifiedReward(bg, rollout.Task{}, path); !n.HasReward || n.Reward != want {
			t.Errorf("leaf %d: reward %v (has %v), want %v from its path", id, n.Reward, n.HasReward, want)
		}
	}
	delivered := stats[0].Rewards + stats[1].Rewards
	if leaves == 0 || delivered != leaves {
		t.Errorf("%d rewards delivered (%+v), %d leaves awaited one", delivered, stats, leaves)
	}
	if sc := stats[0].Scores + stats[1].Scores; sc == 0 || sc > scored {
		t.Errorf("%d scores delivered (%+v), %d computed", sc, stats, scored)
	}
	s.closeDone("r", 1)
}

// A Verifier with nothing to compute is refused at once.
func TestVerifierNeedsAFunction(t *testing.T) {
	v := &client.Verifier{Client: client.New("http://127.0.0.1:1"), Run: "r"}
	if _, err := v.Serve(bg, 1); err == nil {
		t.Fatal("a Verifier without Reward or Score served")
	}
}

// A batch of rewards refused because one was delivered first elsewhere is
// sorted out one by one: that one is dropped, every other delivered.
func TestVerifierDropsWhatAnotherDeliveredFirst(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	s.openStep("r", 1, 1)
	w := s.worker("r", "w", 4)
	w.DeferRewards = true
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if _, err := w.Work(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p, err := s.c.Pending(bg, "r", 1, false)
	if err != nil || len(p.Rewards) < 2 || p.Rewards[0].History != nil {
		t.Fatalf("pending %+v, %v: want two rewards or more, without their paths", p, err)
	}
	withPaths, err := s.c.Pending(bg, "r", 1, true)
	if err != nil || len(withPaths.Rewards) != len(p.Rewards) || len(withPaths.Rewards[0].History) == 0 {
		t.Fatalf("pending with paths: %+v, %v", withPaths, err)
	}
	var once sync.Once
	v := &client.Verifier{Client: s.c, Run: "r", Poll: 5 * time.Millisecond,
		Reward: func(ctx context.Context, task rollout.Task, path []model.Turn) (float64, error) {
			once.Do(func() { // another verifier delivers the first one asked for
				_, err := s.c.SubmitRewards(ctx, "r", api.RewardsRequest{Rewards: []rollout.RewardSubmission{{Node: p.Rewards[0].Node, Reward: ptr(0.5)}}})
				if err != nil {
					t.Error(err)
				}
			})
			return verifiedReward(ctx, task, path)
		}}
	st, err := v.Serve(ctx, 1)
	if err != nil || st.Dropped != 1 || st.Rewards != len(p.Rewards)-1 {
		t.Fatalf("Serve: %+v, %v; want 1 dropped and %d delivered", st, err, len(p.Rewards)-1)
	}
	s.closeDone("r", 1)
}

func ptr[T any](v T) *T { return &v }

// A score outside [0,1] is never delivered as a score: it is the branch's
// scorer error, so the branch fails as on any scorer failure, naming the
// score.
func TestVerifierRefusesAScoreOutsideTheUnitInterval(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", `{"b0":1,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6,"remote_scores":true}`)
	s.openStep("r", 1, 1)
	w := s.worker("r", "w", 4)
	w.Scorer = nil
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	v := &client.Verifier{Client: s.c, Run: "r", Poll: 5 * time.Millisecond,
		Score: func(context.Context, rollout.Task, []model.Turn) (float64, error) { return 1.5, nil }}
	var wg sync.WaitGroup
	var werr, verr error
	var st client.VerifyStats
	wg.Add(2)
	go func() { defer wg.Done(); _, werr = w.Work(ctx, 1) }()
	go func() { defer wg.Done(); st, verr = v.Serve(ctx, 1) }()
	wg.Wait()
	if werr != nil || verr != nil {
		t.Fatalf("worker: %v; verifier: %v", werr, verr)
	}
	failed := 0
	for id, n := range s.nodes("r", 1) {
		if n.Status == model.NodeFailed {
			failed++
			if !strings.Contains(n.Error, "score 1.5 is outside [0,1]") {
				t.Errorf("node %d failed with %q; want the score named", id, n.Error)
			}
		}
	}
	if failed == 0 || st.Scores == 0 {
		t.Errorf("%d nodes failed, %+v delivered; want the branch failed by the scores delivered as errors", failed, st)
	}
}
