package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// A lease carries the branch's path less what the worker says it holds:
// nothing of a path it holds whole; only the turns past the fork when it
// holds the parent's path up to the fork — also when that is all it holds;
// the whole path (history_of 0, history_from 0, so a client rebuilds from
// nothing) when it holds no part, the parent's path short of the fork, or
// its own path at another length. Up to api.MaxHave held paths are taken.
func TestLeaseHistoryPastWhatTheWorkerHolds(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6}`)
	openStep(e, "r1", 1)
	roots := leaseAll(e, "r1", 1)
	var subs []rollout.Submission
	var best, kept uint64
	for n, l := range roots {
		score := 0.8
		if best == 0 {
			best, score = n, 0.9
		} else {
			kept = n
		}
		subs = append(subs, sub(l, ptr(score), turn(fmt.Sprint("a", n), 0), turn(fmt.Sprint("b", n), 0)))
	}
	submitOK(e, "r1", "s", subs...)

	lease := func(have ...api.HeldPath) map[uint64]api.LeaseGrant {
		t.Helper()
		var lr api.LeaseResponse
		e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Step: 1, Have: have}, http.StatusOK, &lr)
		out := map[uint64]api.LeaseGrant{}
		var ids []string
		for _, l := range lr.Leases {
			out[l.Node] = l
			ids = append(ids, l.ID)
		}
		if len(out) != 3 || out[kept].Node != kept {
			t.Fatalf("leases %+v: want the kept root and the best root's two children", lr.Leases)
		}
		e.post("/api/v1/runs/r1/leases/release", api.LeasesRequest{Worker: "w", Leases: ids}, http.StatusOK, nil)
		return out
	}
	whole := func(what string, g api.LeaseGrant) {
		t.Helper()
		if len(g.History) != 2 || g.HistoryOf != 0 || g.HistoryFrom != 0 {
			t.Errorf("%s: node %d: %d turns, history of %d from %d; want its whole path of 2 from nothing",
				what, g.Node, len(g.History), g.HistoryOf, g.HistoryFrom)
		}
	}

	for n, g := range lease() {
		whole("nothing held", g)
		_ = n
	}
	for n, g := range lease(api.HeldPath{Node: best, PathLen: 2}) {
		if n == kept {
			whole("the parent held", g)
		} else if len(g.History) != 0 || g.HistoryOf != best || g.HistoryFrom != 2 {
			t.Errorf("the parent held: child %d: %d turns, history of %d from %d; want none, of %d from 2",
				n, len(g.History), g.HistoryOf, g.HistoryFrom, best)
		}
	}
	for _, g := range lease(api.HeldPath{Node: best, PathLen: 1}) {
		whole("the parent held short of the fork", g)
	}
	for n, g := range lease(api.HeldPath{Node: kept, PathLen: 1}) {
		if n == kept {
			whole("its own path held shorter than it is", g)
		}
	}
	for n, g := range lease(api.HeldPath{Node: kept, PathLen: 2}) {
		if n == kept && (len(g.History) != 0 || g.HistoryOf != kept || g.HistoryFrom != 2) {
			t.Errorf("its own path held: %d turns, history of %d from %d; want none, of %d from 2", len(g.History), g.HistoryOf, g.HistoryFrom, kept)
		}
		if n != kept {
			whole("another path held", g)
		}
	}
	// As many held paths as the bound allows are taken.
	many := make([]api.HeldPath, api.MaxHave)
	for i := range many {
		many[i] = api.HeldPath{Node: uint64(1000 + i), PathLen: 1}
	}
	many[0] = api.HeldPath{Node: kept, PathLen: 2}
	for n, g := range lease(many...) {
		if n == kept && (len(g.History) != 0 || g.HistoryOf != kept) {
			t.Errorf("with %d held paths: %d turns, history of %d", api.MaxHave, len(g.History), g.HistoryOf)
		}
	}
	var lr api.LeaseResponse
	e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Step: 1, History: ptr(false)}, http.StatusOK, &lr)
	for _, g := range lr.Leases {
		if len(g.History) != 0 || g.HistoryOf != 0 {
			t.Errorf("history false: node %d sent %d turns", g.Node, len(g.History))
		}
	}
}

// A read-only server hands out no lease: 403 read_only, nothing written.
func TestReadOnlyServerHandsOutNoLeases(t *testing.T) {
	rw := newEnv(t, Options{})
	createRun(rw, "r1", testTree)
	openStep(rw, "r1", 1)
	e := newEnvDB(t, rw.db, Options{ReadOnly: true})
	before := e.fileSum()
	st, h, body := e.call(http.MethodPost, "/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Step: 1})
	if st != http.StatusForbidden || !containsCode(body, "read_only") || e.fileSum() != before {
		t.Fatalf("lease on a read-only server: %d %s", st, body)
	}
	assertErrorBody(t, h, body)
}

// Publishing a version answers the run as it now is.
func TestPublishAnswersTheRun(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	var out api.CreateRunResponse
	e.post("/api/v1/runs/r1/version", api.PublishRequest{Keyed: api.Keyed{ClientKey: "v"}, Version: 3}, http.StatusOK, &out)
	if out.Run.ID != "r1" || out.Run.PolicyVersion != 3 {
		t.Errorf("publish answered %+v, want run r1 at version 3", out.Run.Run)
	}
}

// Abandoning a step answers its groups, now closed (without advantages).
func TestAbandonAnswersTheGroups(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	g := openStep(e, "r1", 1)
	var out api.OpenStepResponse
	e.post("/api/v1/runs/r1/steps/1/abandon", api.AbandonRequest{Keyed: api.Keyed{ClientKey: "a"}, Reason: "test"}, http.StatusOK, &out)
	if out.Step != 1 || len(out.Groups) != 1 || out.Groups[0].ID != g.ID || out.Groups[0].Status != model.GroupClosed {
		t.Errorf("abandon answered %+v, want group %d closed", out, g.ID)
	}
}

// The rollout endpoints name what is wrong with a request: a run that
// does not exist is 404, a step that is no number 400, and so is a list
// of scores with nothing in it; none writes anything.
func TestRolloutEndpointsRefuseBadRequests(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	before := e.fileSum()
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/api/v1/runs/nope/steps/1/status", "", 404},
		{"GET", "/api/v1/runs/r1/steps/x/status", "", 400},
		{"GET", "/api/v1/runs/nope/steps/1/pending", "", 404},
		{"GET", "/api/v1/runs/r1/steps/x/pending", "", 400},
		{"POST", "/api/v1/runs/nope/steps/1/abandon", `{"client_key":"k"}`, 404},
		{"POST", "/api/v1/runs/r1/steps/x/abandon", `{"client_key":"k"}`, 400},
		{"POST", "/api/v1/runs/nope/leases", `{"worker":"w"}`, 404},
		{"POST", "/api/v1/runs/nope/version", `{"client_key":"k","version":2}`, 404},
		{"POST", "/api/v1/runs/r1/scores", `{"client_key":"k","scores":[]}`, 400},
		{"POST", "/api/v1/runs/nope/steps", `{"client_key":"k","step":1,"tasks":[{"id":"t","prompt":"p"}]}`, 404},
		{"POST", "/api/v1/runs/nope/submit", `{"client_key":"k","submissions":[{"lease":"x","worker":"w","node":1}]}`, 404},
		{"POST", "/api/v1/runs/nope/rewards", `{"client_key":"k","rewards":[{"node":1,"reward":1}]}`, 404},
		{"POST", "/api/v1/runs/nope/scores", `{"client_key":"k","scores":[{"node":1,"interval":0,"score":0.5}]}`, 404},
		{"POST", "/api/v1/runs/nope/leases/renew", `{"worker":"w","leases":["x"]}`, 404},
	} {
		var body any
		if c.body != "" {
			body = c.body
		}
		if st, _, data := e.call(c.method, c.path, body); st != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, st, data, c.status)
		}
	}
	if e.fileSum() != before {
		t.Error("a refused request changed the file")
	}
}

// The pending listing names the work a step waits for from outside its
// workers — a remote score per branch at its interval's end, the outcome
// reward of a branch that ended with it deferred — with each branch's
// path when asked (history=1), and without it otherwise.
func TestPendingListsTheAwaitedWork(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6,"remote_scores":true}`)
	openStep(e, "r1", 1)
	ls := leaseAll(e, "r1", 1)
	var subs []rollout.Submission
	var ended, scored uint64
	for n, l := range ls {
		if ended == 0 {
			ended = n
			s := sub(l, nil, done(turn("a", 0)))
			s.RewardPending = true
			subs = append(subs, s)
			continue
		}
		scored = n
		subs = append(subs, sub(l, nil, turn("b", 0), turn("c", 0)))
	}
	submitOK(e, "r1", "s", subs...)
	for _, q := range []string{"", "?history=0", "?history=1"} {
		var p api.PendingResponse
		e.get("/api/v1/runs/r1/steps/1/pending"+q, &p)
		if p.Step != 1 || len(p.Rewards) != 1 || len(p.Scores) != 1 || p.Rewards[0].Node != ended || p.Scores[0].Node != scored {
			t.Fatalf("pending%s: %+v; want node %d's reward and node %d's score", q, p, ended, scored)
		}
		want := [2]int{}
		if q == "?history=1" {
			want = [2]int{1, 2}
		}
		if got := [2]int{len(p.Rewards[0].History), len(p.Scores[0].History)}; got != want {
			t.Errorf("pending%s: paths of %v turns, want %v", q, got, want)
		}
		if q == "?history=1" && (p.Rewards[0].History[0].Action != "a" || p.Scores[0].History[1].Action != "c") {
			t.Errorf("pending%s: the paths are not the branches': %+v", q, p)
		}
	}
}

// Work that waits past the run's pending timeout is failed by the next
// request that polls the step (status, pending, leases) — on a server
// that may write; a read-only one reports it still waiting.
func TestOverdueWorkIsFailedByThePoll(t *testing.T) {
	for _, path := range []string{"/steps/1/status", "/steps/1/pending", "/leases"} {
		e := newEnv(t, Options{})
		createRun(e, "r1", `{"b0":1,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6,"pending_ttl_ms":1}`)
		openStep(e, "r1", 1)
		for _, l := range leaseAll(e, "r1", 1) {
			s := sub(l, nil, done(turn("a", 0)))
			s.RewardPending = true
			submitOK(e, "r1", "s", s)
		}
		time.Sleep(20 * time.Millisecond)
		ro := newEnvDB(t, e.db, Options{ReadOnly: true})
		var st rollout.StepStatus
		ro.get("/api/v1/runs/r1/steps/1/status", &st)
		if st.AwaitingRewards != 1 {
			t.Fatalf("a read-only server's status: %+v, want the reward still awaited", st)
		}
		if path == "/leases" {
			e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Step: 1}, http.StatusOK, nil)
		} else {
			e.get("/api/v1/runs/r1"+path, &json.RawMessage{})
		}
		ro.get("/api/v1/runs/r1/steps/1/status", &st)
		if st.AwaitingRewards != 0 {
			t.Errorf("after GET %s: %+v, want the overdue reward failed", path, st)
		}
	}
}

// liveDamageEnv is a server over a file with no node cache (a node read comes
// from the file), for tests that damage records after the server's check
// of the run has passed; the file is left damaged, so it is not checked at
// cleanup.
func liveDamageEnv(t *testing.T) *testEnv {
	t.Helper()
	opts := storetest.Options()
	opts.CacheNodes = store.NoCache
	db, err := store.Open(filepath.Join(t.TempDir(), "patr.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, "the store", func() { _ = db.Close() }) })
	return newEnvDB(t, db, Options{})
}

// damage flips the last byte of every value in run's sub-bucket name whose
// key is node's id ("nodes") or ends with it ("turns": seq|node), so reading
// it fails its checksum.
func damage(t *testing.T, db *store.DB, run, name string, node uint64) {
	t.Helper()
	id := binary.BigEndian.AppendUint64(nil, node)
	n := 0
	err := storetest.Bolt(db).Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte(name))
		var keys [][]byte
		_ = b.ForEach(func(k, _ []byte) error {
			if bytes.Equal(k, id) || len(k) == 16 && bytes.Equal(k[8:], id) {
				keys = append(keys, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range keys {
			v := bytes.Clone(b.Get(k))
			v[len(v)-1] ^= 0xff
			if err := b.Put(k, v); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("damage runs/%s/%s of node %d: %d records, %v", run, name, node, n, err)
	}
}

// wantDamaged asserts a request answered 500 "damaged": a record the
// answer needs could not be read, so no partial answer is given.
func wantDamaged(t *testing.T, what string, status int, body []byte) {
	t.Helper()
	var eb api.ErrorBody
	_ = json.Unmarshal(body, &eb)
	if status != http.StatusInternalServerError || eb.Code != "damaged" {
		t.Errorf("%s: %d %s; want 500 damaged", what, status, body)
	}
}

// A record damaged after the server checked the run — under a running
// server — fails the rollout reads that need it with 500 "damaged"; none
// answers 200 with what it could read. The pending listing's paths, the
// status and pending reads of a damaged branch, and a lease's history.
func TestRolloutReadsOfDamagedRecordsFail(t *testing.T) {
	pendingRun := func(t *testing.T) (e *testEnv, ended, scored uint64) {
		e = liveDamageEnv(t)
		createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6,"remote_scores":true}`)
		openStep(e, "r1", 1)
		var subs []rollout.Submission
		for n, l := range leaseAll(e, "r1", 1) {
			if ended == 0 {
				ended = n
				s := sub(l, nil, done(turn("a", 0)))
				s.RewardPending = true
				subs = append(subs, s)
				continue
			}
			scored = n
			subs = append(subs, sub(l, nil, turn("b", 0), turn("c", 0)))
		}
		submitOK(e, "r1", "s", subs...)
		var p api.PendingResponse
		e.get("/api/v1/runs/r1/steps/1/pending?history=1", &p)
		return e, ended, scored
	}
	for _, which := range []string{"scored", "ended"} {
		t.Run("pending paths, "+which, func(t *testing.T) {
			e, ended, scored := pendingRun(t)
			node := map[string]uint64{"scored": scored, "ended": ended}[which]
			damage(t, e.db, "r1", "turns", node)
			status, _, body := e.call("GET", "/api/v1/runs/r1/steps/1/pending?history=1", nil)
			wantDamaged(t, "pending?history=1 with the "+which+" branch's turns damaged", status, body)
			var p api.PendingResponse
			e.get("/api/v1/runs/r1/steps/1/pending", &p)
			if len(p.Scores) != 1 || len(p.Rewards) != 1 {
				t.Errorf("pending without paths reads no turns: %+v", p)
			}
		})
	}
	t.Run("status and pending, a node", func(t *testing.T) {
		e, _, scored := pendingRun(t)
		damage(t, e.db, "r1", "nodes", scored)
		for _, path := range []string{"/steps/1/status", "/steps/1/pending"} {
			status, _, body := e.call("GET", "/api/v1/runs/r1"+path, nil)
			wantDamaged(t, path+" with a node damaged", status, body)
		}
	})
	t.Run("lease history", func(t *testing.T) {
		e := liveDamageEnv(t)
		createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6}`)
		openStep(e, "r1", 1)
		var subs []rollout.Submission
		var best uint64
		for n, l := range leaseAll(e, "r1", 1) {
			score := 0.5
			if best == 0 {
				best, score = n, 0.9
			}
			subs = append(subs, sub(l, ptr(score), turn("a", 0), turn("b", 0)))
		}
		submitOK(e, "r1", "s", subs...)
		damage(t, e.db, "r1", "turns", best)
		// The best branch's children continue its path: their history
		// reads its turns; a worker holding that path reads none.
		var lr api.LeaseResponse
		e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Step: 1, Have: []api.HeldPath{{Node: best, PathLen: 2}}}, http.StatusOK, &lr)
		var ids []string
		for _, l := range lr.Leases {
			ids = append(ids, l.ID)
		}
		if len(ids) == 0 {
			t.Fatalf("holding the damaged path: no lease: %+v", lr)
		}
		e.post("/api/v1/runs/r1/leases/release", api.LeasesRequest{Worker: "w", Leases: ids}, http.StatusOK, nil)
		status, _, body := e.call("POST", "/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "w", Step: 1})
		wantDamaged(t, "a lease whose history has a damaged turn", status, body)
	})
	t.Run("overdue sweep", func(t *testing.T) {
		for _, path := range []string{"/steps/1/status", "/steps/1/pending", "/leases"} {
			e := liveDamageEnv(t)
			createRun(e, "r1", `{"b0":1,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":6,"pending_ttl_ms":1}`)
			openStep(e, "r1", 1)
			var n uint64
			for id, l := range leaseAll(e, "r1", 1) {
				s := sub(l, nil, done(turn("a", 0)))
				s.RewardPending = true
				submitOK(e, "r1", "s", s)
				n = id
			}
			time.Sleep(20 * time.Millisecond)
			damage(t, e.db, "r1", "nodes", n)
			method, body := "GET", any(nil)
			if path == "/leases" {
				method, body = "POST", api.LeaseRequest{Worker: "w", Step: 1}
			}
			status, _, out := e.call(method, "/api/v1/runs/r1"+path, body)
			wantDamaged(t, path+" sweeping a damaged overdue branch", status, out)
		}
	})
}
