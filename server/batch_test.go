package server

import (
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
)

// Concurrent writes commit in shared transactions; a bad one among them
// fails alone and writes nothing, the good ones all land exactly once.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":16,"k":6,"m":2,"top_expand":1,"delta":0.5}`)
	og := openStep(e, "r1", 1)
	ls := leaseAll(e, "r1", 1)
	const rounds = 6
	var wg sync.WaitGroup
	statuses := make([][]int, len(og.Roots))
	for i, node := range og.Roots {
		statuses[i] = make([]int, rounds)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < rounds; k++ {
				from := k
				if i%4 == 3 && k == 2 {
					from = 7 // a gap: refused
				}
				body := fmt.Sprintf(`{"client_key":"n%d-%d","submissions":[{"lease":%q,"worker":"test","node":%d,"from":%d,"turns":[{"action":"n%d t%d","observation":"o"}]}]}`,
					node, k, ls[node].ID, node, from, node, k)
				st, _, _ := e.call(http.MethodPost, "/api/v1/runs/r1/submit", body)
				statuses[i][k] = st
				if st != 200 {
					return
				}
			}
		}()
	}
	wg.Wait()
	err := e.db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("r1")
		for i, node := range og.Roots {
			turns, err := r.Turns(node)
			if err != nil {
				return err
			}
			want := rounds
			if i%4 == 3 {
				want = 2
				if statuses[i][2] != http.StatusConflict {
					t.Errorf("node %d: the gap got %d", node, statuses[i][2])
				}
			}
			if len(turns) != want {
				t.Errorf("node %d: %d turns, want %d (statuses %v)", node, len(turns), want, statuses[i])
			}
			for k, tu := range turns {
				if tu.Action != fmt.Sprintf("n%d t%d", node, k) {
					t.Errorf("node %d turn %d: %q", node, k, tu.Action)
				}
			}
		}
		// One turns event and one reply per successful request.
		kinds := map[model.EventKind]int{}
		err := r.Events(1, func(ev model.Event) error { kinds[ev.Kind]++; return nil })
		good := 12*rounds + 4*2
		if kinds[model.EvTurns] != good || kinds[model.EvReply] != good+2 {
			t.Errorf("events %v, want %d turn writes", kinds, good)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runBatch directly: a job that fails after writing leaves the batch and
// its write is rolled back; the others commit together; a second job with
// a key already in the batch is answered, in the same transaction, with
// the first one's reply, and one with that key but another request gets a
// 409 without failing the batch.
func TestRunBatch(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	og := openStep(e, "r1", 1)
	s := e.srv.Config.Handler.(*server)
	appendOp := func(node uint64, action string, fail bool) writeOp {
		return func(tx *store.Tx) (int, any, error) {
			r, _ := tx.Run("r1")
			n, _ := r.Node(node)
			if err := r.AppendTurns(node, n.Turns, model.Turn{Action: action}); err != nil {
				return 0, nil, err
			}
			if fail {
				return 0, nil, conflict("refused after writing")
			}
			return 200, map[string]string{"action": action}, nil
		}
	}
	mk := func(key string, fn writeOp) *job {
		return &job{run: "r1", key: key, op: "POST test", fp: []byte(key), fn: fn, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	}
	a, b := og.Roots[0], og.Roots[1]
	j1 := mk("k1", appendOp(a, "a0", false))
	j2 := mk("k2", appendOp(a, "bad", true))
	j3 := mk("k3", appendOp(b, "b0", false))
	j4 := mk("k1", appendOp(a, "a0", false)) // the same request again
	j4.fp = j1.fp
	j5 := mk("k3", appendOp(b, "other", false)) // k3's key for another request
	j5.fp = []byte("other")
	s.runBatch([]*job{j1, j2, j3, j4, j5})
	for _, j := range []*job{j1, j2, j3, j4, j5} {
		<-j.done
	}
	if j1.err != nil || j3.err != nil || j2.err == nil || j1.status != 200 || string(j3.body) != "{\"action\":\"b0\"}\n" {
		t.Fatalf("j1 %v %d, j2 %v, j3 %v %s", j1.err, j1.status, j2.err, j3.err, j3.body)
	}
	if j4.err != nil || !j4.replay || string(j4.body) != string(j1.body) {
		t.Fatalf("j4: %v, replay %v body %s", j4.err, j4.replay, j4.body)
	}
	if st, code := classify(j5.err); st != 409 || code != "conflict" {
		t.Fatalf("j5, a used key for another request: %v (%d %s), want a 409", j5.err, st, code)
	}
	_ = e.db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("r1")
		ta, _ := r.Turns(a)
		tb, _ := r.Turns(b)
		if len(ta) != 1 || ta[0].Action != "a0" || len(tb) != 1 {
			t.Errorf("node a %v, node b %v", ta, tb)
		}
		return nil
	})
}

// A write whose handler panics fails alone with a 500; the batch's other
// writes commit and the queue keeps serving.
func TestPanicInABatch(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	s := e.srv.Config.Handler.(*server)
	ok := func(tx *store.Tx) (int, any, error) {
		r, _ := tx.Run("r1")
		_, err := r.OpenGroup(store.GroupSpec{Step: 1})
		return 201, "ok", err
	}
	boom := func(*store.Tx) (int, any, error) { panic("boom") }
	mk := func(key string, fn writeOp) *job {
		return &job{run: "r1", key: key, op: "POST test", fp: []byte(key), fn: fn, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	}
	j1, j2, j3 := mk("a", ok), mk("b", boom), mk("c", ok)
	s.runBatch([]*job{j1, j2, j3})
	if j1.err != nil || j3.err != nil || j2.err == nil {
		t.Fatalf("%v %v %v", j1.err, j2.err, j3.err)
	}
	if st, _ := classify(j2.err); st != 500 {
		t.Fatalf("panic classified %d", st)
	}
	var groups struct{ Groups []model.Group }
	e.get("/api/v1/runs/r1/steps/1/groups", &groups)
	if len(groups.Groups) != 2 {
		t.Fatalf("%d groups", len(groups.Groups))
	}
	openStep(e, "r1", 2)
}

// patrdb_write_batch_requests counts each commit and the requests whose
// writes it committed: a failed job and a replay are not among them, and
// a batch that only replays commits nothing.
func TestBatchRequestsPerCommit(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	s := e.srv.Config.Handler.(*server)
	counts := func() (requests, commits float64) {
		_, _, body := e.call(http.MethodGet, "/metrics", nil)
		requests, _ = metricValue(t, string(body), "patrdb_write_batch_requests_sum")
		commits, _ = metricValue(t, string(body), "patrdb_write_batch_requests_count")
		return requests, commits
	}
	r0, c0 := counts()
	if r0 != 1 || c0 != 1 { // the run's creation
		t.Fatalf("after one write: %v requests in %v commits", r0, c0)
	}
	ok := func(tx *store.Tx) (int, any, error) {
		r, _ := tx.Run("r1")
		_, err := r.OpenGroup(store.GroupSpec{Step: 1})
		return 201, "ok", err
	}
	fail := func(*store.Tx) (int, any, error) { return 0, nil, conflict("refused") }
	mk := func(key string, fn writeOp) *job {
		return &job{run: "r1", key: key, op: "POST test", fp: []byte(key), fn: fn, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	}
	s.runBatch([]*job{mk("a", ok), mk("b", fail), mk("c", ok), mk("d", ok)})
	s.runBatch([]*job{mk("a", ok), mk("c", ok)})              // replays only
	s.runBatch([]*job{mk("e", ok), mk("a", ok), mk("f", ok)}) // two writes and a replay
	if r, c := counts(); r-r0 != 5 || c-c0 != 2 {
		t.Fatalf("%v requests in %v commits, want 5 in 2", r-r0, c-c0)
	}
}

// A leader holds its batch open for the writes announced to be on their
// way, and no longer than it takes them to queue or give up.
func TestBatchWaitsForAnnouncedWrites(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	s := e.srv.Config.Handler.(*server)
	s.batch.delay = time.Hour // only the announced writes end the wait
	ok := func(tx *store.Tx) (int, any, error) {
		r, _ := tx.Run("r1")
		_, err := r.OpenGroup(store.GroupSpec{Step: 1})
		return 201, "ok", err
	}
	mk := func(key string) *job {
		return &job{run: "r1", key: key, op: "POST test", fp: []byte(key), fn: ok, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	}
	commits := func() float64 {
		_, _, body := e.call(http.MethodGet, "/metrics", nil)
		v, _ := metricValue(t, string(body), "patrdb_write_batch_requests_count")
		return v
	}
	wait := func(j *job) {
		t.Helper()
		select {
		case <-j.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the leader is still waiting")
		}
	}
	c0 := commits()
	a, b := s.batch.announce(), s.batch.announce()
	j1, j2 := mk("one"), mk("two")
	go s.submit(j1) // leads, and waits for a and b
	for queued := false; !queued; {
		s.batch.mu.Lock()
		queued = s.batch.leading
		s.batch.mu.Unlock()
	}
	j2.arrival = a
	go s.submit(j2)
	s.batch.land(b) // b's request failed before it queued
	wait(j1)
	wait(j2)
	if j1.err != nil || j2.err != nil {
		t.Fatal(j1.err, j2.err)
	}
	if got := commits() - c0; got != 1 {
		t.Fatalf("two writes, the second announced, in %v commits, want 1", got)
	}
}
