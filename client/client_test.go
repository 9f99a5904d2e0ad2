package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/rollout"
)

// scripted is a server that answers the index, then each POST with the next
// of its answers (status, body), recording the bodies it was sent.
type scripted struct {
	mu      sync.Mutex
	answers []struct {
		status int
		body   string
	}
	got []string
}

func (s *scripted) serve(t *testing.T) *client.Client {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"api_version":"1.2"}`)) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, string(b))
		a := s.answers[0]
		if len(s.answers) > 1 {
			s.answers = s.answers[1:]
		}
		if strings.Contains(a.body, `"checking"`) {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	c.Backoff = time.Millisecond
	return c
}

func (s *scripted) answer(status int, body string) *scripted {
	s.answers = append(s.answers, struct {
		status int
		body   string
	}{status, body})
	return s
}

// A write that met a 5xx is sent again with the same body and the same
// client key (filled in once), so the server can answer the retry with the
// first answer instead of writing twice.
func TestRetrySendsTheSameKey(t *testing.T) {
	s := (&scripted{}).answer(503, `{"error":"locked","code":"locked"}`).answer(200, `{"step":4,"groups":[]}`)
	c := s.serve(t)
	c.Retries = 2
	req := api.OpenStepRequest{Step: 4, Tasks: []rollout.Task{{ID: "t"}}}
	out, err := c.OpenStep(context.Background(), "r", req)
	if err != nil || out.Step != 4 {
		t.Fatalf("OpenStep = %+v, %v", out, err)
	}
	if len(s.got) != 2 || s.got[0] != s.got[1] {
		t.Fatalf("sent %q, want the same body twice", s.got)
	}
	var sent api.OpenStepRequest
	if err := json.Unmarshal([]byte(s.got[0]), &sent); err != nil || len(sent.ClientKey) < 16 {
		t.Errorf("sent client key %q (%v), want a random one", sent.ClientKey, err)
	}
}

// A server checking a run before its first use answers 503 "checking"
// until it is done: the client waits each answer's Retry-After and asks
// again, without spending its retries, for up to CheckWait in all.
func TestWaitsOutARunCheck(t *testing.T) {
	const checking = `{"error":"run \"r\" is being checked","code":"checking"}`
	s := (&scripted{}).answer(503, checking).answer(503, checking).answer(200, `{"step":4,"groups":[]}`)
	c := s.serve(t)
	if out, err := c.OpenStep(context.Background(), "r", api.OpenStepRequest{Step: 4}); err != nil || out.Step != 4 || len(s.got) != 3 {
		t.Fatalf("OpenStep = %+v, %v after %d sends; want step 4 after three", out, err, len(s.got))
	}
	s = (&scripted{}).answer(503, checking)
	c = s.serve(t)
	c.CheckWait = 1500 * time.Millisecond
	var ae *client.APIError
	start := time.Now()
	if _, err := c.OpenStep(context.Background(), "r", api.OpenStepRequest{Step: 4}); !errors.As(err, &ae) || ae.Code != "checking" {
		t.Fatalf("a check that outlasts CheckWait: %v, want the checking APIError", err)
	}
	if el := time.Since(start); el < time.Second || el > 10*time.Second || len(s.got) > 3 {
		t.Errorf("gave up after %v and %d sends, want about CheckWait (1.5 s) and at most 3", el, len(s.got))
	}
}

// A 4xx is the answer, not a failure to retry; without Retries a 5xx is
// not retried either.
func TestNoRetryOn4xx(t *testing.T) {
	for _, status := range []int{400, 409} {
		s := (&scripted{}).answer(status, `{"error":"no","code":"conflict"}`).answer(200, `{}`)
		c := s.serve(t)
		c.Retries = 3
		if _, err := c.OpenStep(context.Background(), "r", api.OpenStepRequest{Step: 1}); err == nil {
			t.Errorf("%d: no error", status)
		}
		if len(s.got) != 1 {
			t.Errorf("%d: sent %d times, want once", status, len(s.got))
		}
	}
	s := (&scripted{}).answer(500, `{"error":"boom","code":"internal"}`).answer(200, `{}`)
	c := s.serve(t)
	var ae *client.APIError
	if _, err := c.OpenStep(context.Background(), "r", api.OpenStepRequest{Step: 1}); !errors.As(err, &ae) || ae.Status != 500 || len(s.got) != 1 {
		t.Errorf("500 without Retries: %v after %d sends, want the APIError after one", err, len(s.got))
	}
}

// An error answer matches the sentinel a caller of the library would test
// for, and no other kind.
func TestAPIErrorSentinels(t *testing.T) {
	cases := []struct {
		status int
		code   string
		is     []error
		isNot  []error
	}{
		{404, "not_found", []error{model.ErrNotFound}, []error{api.ErrConflict, api.ErrBadRequest}},
		{409, "lease_lost", []error{rollout.ErrLeaseLost, rollout.ErrConflict, api.ErrConflict}, []error{rollout.ErrTooEarly, model.ErrNotFound}},
		{409, "exists", []error{model.ErrExists, api.ErrConflict}, []error{rollout.ErrLeaseLost}},
		{409, "branch_ended", []error{rollout.ErrBranchEnded}, []error{rollout.ErrLeaseLost}},
		{413, "too_large", []error{api.ErrBadRequest}, []error{api.ErrConflict}},
		{415, "unsupported_media_type", []error{api.ErrBadRequest}, nil},
		{400, "bad_request", []error{api.ErrBadRequest}, []error{model.ErrNotFound}},
	}
	for _, tc := range cases {
		s := (&scripted{}).answer(tc.status, `{"error":"x","code":"`+tc.code+`"}`)
		_, err := s.serve(t).OpenStep(context.Background(), "r", api.OpenStepRequest{Step: 1})
		for _, target := range tc.is {
			if !errors.Is(err, target) {
				t.Errorf("%d %s: not %v", tc.status, tc.code, target)
			}
		}
		for _, target := range tc.isNot {
			if errors.Is(err, target) {
				t.Errorf("%d %s: matches %v", tc.status, tc.code, target)
			}
		}
	}
}

// A request whose connection failed before an answer is sent again (the
// server may never have seen it; if it did, the client key makes the
// retry harmless).
func TestRetriesATransportFailure(t *testing.T) {
	var posts atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"api_version":"1.2"}`)) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) == 1 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // the connection drops: no answer at all
			}
			return
		}
		w.Write([]byte(`{"scalars":{"step":3,"values":{"loss":1}}}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	c.Backoff, c.Retries = time.Millisecond, 3
	got, err := c.LogScalars(context.Background(), "r", api.ScalarsRequest{Step: 3, Values: map[string]float64{"loss": 1}})
	if err != nil || got.Step != 3 || posts.Load() != 2 {
		t.Fatalf("after a dropped connection: %+v, %v, %d sends; want the answer to the second", got, err, posts.Load())
	}
}

// The client asks for packed turns only from a server whose API version
// has them (api.PackedSince): an older server of the same major version
// would refuse the parameter.
func TestPackedTurnsOnlyFromServersThatHaveThem(t *testing.T) {
	for version, want := range map[string]bool{"1.0": false, "1.4": false, "1.5": true, "1.10": true} {
		var query atomic.Value
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"api_version":"` + version + `"}`))
		})
		mux.HandleFunc("GET /api/v1/runs/r/nodes/1/trajectory", func(w http.ResponseWriter, r *http.Request) {
			query.Store(r.URL.RawQuery)
			w.Write([]byte(`{"node":{"id":1},"turns":[]}`))
		})
		srv := httptest.NewServer(mux)
		c := client.New(srv.URL)
		_, err := c.Trajectory(context.Background(), "r", 1)
		srv.Close()
		q, _ := query.Load().(string)
		if err != nil || strings.Contains(q, "tokens=") != want {
			t.Errorf("server at %s: trajectory asked with %q (%v); want packed turns asked for: %v", version, q, err, want)
		}
	}
}

// The client's calls reach the endpoints they name, with their
// parameters: each read of a grown, closed step agrees with the others,
// and each write is visible to the reads after it.
func TestCallsReachTheirEndpoints(t *testing.T) {
	s := serve(t, nil)
	s.createRun("r", workerTree)
	s.createRun("other", workerTree)
	s.openStep("r", 1, 2)
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if _, err := s.worker("r", "w", 4).Work(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.closeDone("r", 1)
	groups, err := s.c.Groups(bg, "r", 1)
	if err != nil || len(groups) != 2 {
		t.Fatalf("groups %+v, %v", groups, err)
	}
	g := groups[1]

	// Summaries: the per-step rows and bucket sizes only when asked.
	for _, o := range []model.SummaryOptions{{}, {Steps: true}, {Buckets: true}} {
		one, err := s.c.RunWith(bg, "r", o)
		if err != nil || one.Run.ID != "r" || (len(one.Steps) > 0) != o.Steps || (len(one.Buckets) > 0) != o.Buckets {
			t.Errorf("RunWith %+v: %d step rows, %d buckets, %v", o, len(one.Steps), len(one.Buckets), err)
		}
		all, err := s.c.RunsWith(bg, o)
		if err != nil || len(all) != 2 {
			t.Fatalf("RunsWith %+v: %d runs, %v", o, len(all), err)
		}
		for _, r := range all {
			if r.Run.ID == "r" && ((len(r.Steps) > 0) != o.Steps || (len(r.Buckets) > 0) != o.Buckets) {
				t.Errorf("RunsWith %+v: run r with %d step rows, %d buckets", o, len(r.Steps), len(r.Buckets))
			}
		}
	}
	if steps, err := s.c.Steps(bg, "r"); err != nil || len(steps) != 1 || steps[0].Step != 1 {
		t.Errorf("Steps: %+v, %v", steps, err)
	}

	// A node and its children; the frontier of a finished step is empty.
	tr, err := s.c.Tree(bg, "r", g.ID)
	if err != nil {
		t.Fatal(err)
	}
	root := tr.Nodes[0]
	ni, err := s.c.Node(bg, "r", root.ID)
	if err != nil || ni.Node.ID != root.ID || ni.Node.Group != g.ID {
		t.Errorf("Node %d: %+v, %v", root.ID, ni.Node, err)
	}
	if fr, err := s.c.Frontier(bg, "r", 1); err != nil || len(fr) != 0 {
		t.Errorf("the frontier of a finished step: %d nodes, %v", len(fr), err)
	}

	// Advantages of the step, and of one group only.
	all, err := s.c.Advantages(bg, "r", 1, 0)
	if err != nil || len(all) == 0 {
		t.Fatalf("advantages: %d, %v", len(all), err)
	}
	one, err := s.c.Advantages(bg, "r", 1, g.ID)
	if err != nil || len(one) == 0 || len(one) >= len(all) {
		t.Errorf("advantages of group %d: %d of the step's %d, %v", g.ID, len(one), len(all), err)
	}
	for _, a := range one {
		if a.Group != g.ID {
			t.Errorf("advantages of group %d hold one of group %d", g.ID, a.Group)
		}
	}

	// Events page by page.
	first, err := s.c.Events(bg, "r", 1, 2)
	if err != nil || len(first.Events) != 2 || first.Events[0].Seq != 1 || first.Next != 3 {
		t.Fatalf("events from 1, 2 a page: %d events, next %d, %v", len(first.Events), first.Next, err)
	}
	if next, err := s.c.Events(bg, "r", first.Next, 2); err != nil || len(next.Events) == 0 || next.Events[0].Seq != 3 {
		t.Errorf("the next page: %+v, %v", next, err)
	}

	// A checkpoint written is the one read, by its step and as the latest.
	if _, err := s.c.PutCheckpoint(bg, "r", api.CheckpointRequest{Step: 1, URI: "s3://w/1"}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []uint64{0, 1} {
		if cp, err := s.c.Checkpoint(bg, "r", step); err != nil || cp.Step != 1 || cp.URI != "s3://w/1" {
			t.Errorf("checkpoint (step %d): %+v, %v", step, cp, err)
		}
	}

	// Stats of one run and of every run.
	if st, err := s.c.Stats(bg, "r"); err != nil || len(st.Runs) != 1 || st.Runs[0].Run != "r" || st.Runs[0].Leaves == 0 {
		t.Errorf("stats of r: %+v, %v", st, err)
	}
	if st, err := s.c.Stats(bg, ""); err != nil || len(st.Runs) != 2 {
		t.Errorf("stats of every run: %d runs, %v", len(st.Runs), err)
	}

	// A step opened and abandoned; the run marked finished.
	s.openStep("r", 2, 1)
	if out, err := s.c.AbandonStep(bg, "r", 2, api.AbandonRequest{Reason: "test"}); err != nil || out.Step != 2 || len(out.Groups) != 1 {
		t.Errorf("AbandonStep: %+v, %v", out, err)
	}
	if run, err := s.c.SetRunStatus(bg, "r", api.RunStatusRequest{Status: model.RunFinished}); err != nil || run.Status != model.RunFinished {
		t.Errorf("SetRunStatus: %+v, %v", run, err)
	}
}

// An error answer that is not the API's JSON (a proxy's page, say) is
// still an APIError, its message the body's text.
func TestPlainErrorBody(t *testing.T) {
	s := (&scripted{}).answer(http.StatusBadGateway, " upstream went away\n")
	c := s.serve(t)
	var ae *client.APIError
	_, err := c.OpenStep(context.Background(), "r", api.OpenStepRequest{Step: 1})
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Message != "upstream went away" {
		t.Fatalf("a plain error body: %v", err)
	}
}

// checkingServer answers the index, then POSTs: the first with 503
// "checking" (with retryAfter as its Retry-After header, none when empty),
// every later one with then's status. It returns the client and the times
// of the POSTs.
func checkingServer(t *testing.T, retryAfter string, then int) (*client.Client, func() []time.Time) {
	var (
		mu    sync.Mutex
		times []time.Time
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"api_version":"1.2"}`)) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		first := len(times) == 1
		mu.Unlock()
		if first {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"run \"r\" is being checked","code":"checking"}`))
			return
		}
		w.WriteHeader(then)
		w.Write([]byte(`{"step":4,"groups":[]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	c.Backoff = time.Millisecond
	return c, func() []time.Time { mu.Lock(); defer mu.Unlock(); return slices.Clone(times) }
}

// A check's pause never outlasts CheckWait: a server asking for 30 s
// while 200 ms of CheckWait are left is asked again after those 200 ms,
// and its "checking" is the answer.
func TestCheckWaitCapsRetryAfter(t *testing.T) {
	c, _ := checkingServer(t, "30", http.StatusServiceUnavailable)
	c.CheckWait = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	var ae *client.APIError
	if _, err := c.OpenStep(ctx, "r", api.OpenStepRequest{Step: 4}); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("a check asking for 30 s under a CheckWait of 200 ms: %v; want the server's 503 well before 10 s", err)
	}
}

// A "checking" answer without a Retry-After is asked
// again after 2 s.
func TestCheckingWithoutRetryAfterWaitsTwoSeconds(t *testing.T) {
	c, times := checkingServer(t, "", http.StatusOK)
	if out, err := c.OpenStep(bg, "r", api.OpenStepRequest{Step: 4}); err != nil || out.Step != 4 {
		t.Fatalf("after a check without Retry-After: %+v, %v", out, err)
	}
	ts := times()
	if len(ts) != 2 || ts[1].Sub(ts[0]) < 1900*time.Millisecond || ts[1].Sub(ts[0]) > 10*time.Second {
		t.Errorf("%d sends, %v apart; want two, 2 s apart", len(ts), ts[len(ts)-1].Sub(ts[0]))
	}
}

// After a check's pause, a 5xx is retried after the client's Backoff,
// not after the check's pause again: three retries of a 1 ms backoff
// follow the 1 s pause at once.
func TestRetriesAfterACheckUseTheBackoff(t *testing.T) {
	c, times := checkingServer(t, "1", http.StatusInternalServerError)
	c.Retries = 3
	var ae *client.APIError
	if _, err := c.OpenStep(bg, "r", api.OpenStepRequest{Step: 4}); !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError {
		t.Fatalf("a 500 after the check: %v", err)
	}
	ts := times()
	if len(ts) != 5 {
		t.Fatalf("%d sends, want the checked one, the first try and 3 retries", len(ts))
	}
	if d := ts[4].Sub(ts[1]); d > 900*time.Millisecond {
		t.Errorf("three retries of a 1 ms backoff took %v: the check's 1 s pause was waited again", d)
	}
}

// Submit sends its turns' token arrays packed to a server whose API
// version reads them (api.PackedSince), as JSON arrays to an older one,
// and as a frame to one that reads frames (api.FrameSince), with a client
// key every way.
func TestSubmitPacksTurnsForServersThatHaveThem(t *testing.T) {
	for version, wire := range map[string]string{"1.4": "arrays", "1.5": "packed", "1.6": "packed", "1.7": "frame"} {
		var body, ct atomic.Value
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"api_version":"` + version + `"}`))
		})
		mux.HandleFunc("POST /api/v1/runs/r/submit", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			body.Store(b)
			ct.Store(r.Header.Get("Content-Type"))
			w.Write([]byte(`{}`))
		})
		srv := httptest.NewServer(mux)
		c := client.New(srv.URL)
		turns := []model.Turn{{Action: "a", ActionTokens: model.TokenIDs{1, 2, 3}, ActionLogprobs: model.Logprobs{-0.5, -1, -2}, Observation: "o"}}
		_, err := c.Submit(bg, "r", api.SubmitRequest{Submissions: []rollout.Submission{{Lease: "l", Worker: "w", Node: 1, Turns: turns}}})
		srv.Close()
		b, _ := body.Load().([]byte)
		if wire == "frame" {
			req, ferr := api.ReadSubmitFrame(b, json.Unmarshal)
			if err != nil || ferr != nil || ct.Load() != api.FrameType || len(req.Submissions) != 1 ||
				!reflect.DeepEqual(req.Submissions[0].Turns, turns) || len(req.ClientKey) < 16 {
				t.Errorf("server at %s: sent %v %+v (%v, %v); want a frame of the turns and a random key", version, ct.Load(), req, err, ferr)
			}
			continue
		}
		var sent struct {
			ClientKey   string `json:"client_key"`
			Submissions []struct {
				Turns []struct {
					ActionTokens json.RawMessage `json:"action_tokens"`
				} `json:"turns"`
			} `json:"submissions"`
		}
		if err != nil || json.Unmarshal(b, &sent) != nil || len(sent.Submissions) != 1 || len(sent.Submissions[0].Turns) != 1 {
			t.Fatalf("server at %s: sent %s, %v", version, b, err)
		}
		tokens := string(sent.Submissions[0].Turns[0].ActionTokens)
		if packed := wire == "packed"; strings.HasPrefix(tokens, `"`) != packed || !packed && tokens != "[1,2,3]" || len(sent.ClientKey) < 16 {
			t.Errorf("server at %s: action_tokens sent as %s, client key %q; want %s, and a random key", version, tokens, sent.ClientKey, wire)
		}
	}
}

// A submission that cannot be written (a NaN reward: JSON has no NaN) is
// an error of the client's own, whatever the server's version, and
// nothing is sent: no empty or partial body reaches the server.
func TestSubmitThatCannotBeEncodedSendsNothing(t *testing.T) {
	for _, version := range []string{"1.4", "1.5", "1.7"} {
		var posts atomic.Int32
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"api_version":"` + version + `"}`))
		})
		mux.HandleFunc("POST /api/v1/runs/r/submit", func(w http.ResponseWriter, r *http.Request) {
			posts.Add(1)
			w.Write([]byte(`{}`))
		})
		srv := httptest.NewServer(mux)
		c := client.New(srv.URL)
		nan := math.NaN()
		_, err := c.Submit(bg, "r", api.SubmitRequest{Submissions: []rollout.Submission{{Lease: "l", Worker: "w", Node: 1,
			Turns: []model.Turn{{Action: "a", Observation: "o", Done: true}}, Reward: &nan}}})
		srv.Close()
		var ae *client.APIError
		if err == nil || errors.As(err, &ae) || posts.Load() != 0 {
			t.Errorf("server at %s: a NaN reward: %v, %d requests sent; want the client's own error and none sent", version, err, posts.Load())
		}
	}
}

// Lease asks every server for a frame and reads what comes back: a frame
// from a server that writes them (api.FrameSince), JSON from an older one.
func TestLeaseReadsFramesAndJSON(t *testing.T) {
	turns := []model.Turn{{Action: "a", ActionTokens: model.TokenIDs{1, 2, 3}, ActionLogprobs: model.Logprobs{-0.5, -1, -2}, Observation: "o"}}
	grants := api.LeaseResponse{Leases: []api.LeaseGrant{{Lease: rollout.Lease{ID: "l", Node: 1, PathLen: 1}, History: turns}}}
	for _, framed := range []bool{false, true} {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"api_version":"1.7"}`)) })
		mux.HandleFunc("POST /api/v1/runs/r/leases", func(w http.ResponseWriter, r *http.Request) {
			if framed && strings.Contains(r.Header.Get("Accept"), api.FrameType) {
				b, _ := api.LeaseFrame(grants)
				w.Header().Set("Content-Type", api.FrameType)
				w.Write(b)
				return
			}
			b, _ := json.Marshal(api.Packed(grants))
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
		})
		srv := httptest.NewServer(mux)
		got, err := client.New(srv.URL).Lease(bg, "r", api.LeaseRequest{Worker: "w"})
		srv.Close()
		if err != nil || !reflect.DeepEqual(got, grants.Leases) {
			t.Errorf("answered as a frame: %v: lease read as %+v, %v; want %+v", framed, got, err, grants.Leases)
		}
	}
}

// A reply cut short (the connection closed before the body its
// Content-Length announced) is retried like a dropped connection, never
// decoded in part.
func TestReplyCutShortIsRetried(t *testing.T) {
	var posts atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"api_version":"1.2"}`)) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		if posts.Add(1) == 1 {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte(`{"step":4,`))
			return
		}
		w.Write([]byte(`{"step":4,"groups":[]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := client.New(srv.URL)
	c.Backoff, c.Retries = time.Millisecond, 1
	out, err := c.OpenStep(bg, "r", api.OpenStepRequest{Step: 4})
	if err != nil || out.Step != 4 || posts.Load() != 2 {
		t.Fatalf("after a reply cut short: %+v, %v, %d sends; want the second answer", out, err, posts.Load())
	}
}

// A base URL that does not parse is every call's error, not a panic.
func TestABadBaseURLIsAnError(t *testing.T) {
	c := client.New("http://[::1")
	if _, err := c.APIVersion(bg); err == nil {
		t.Error("APIVersion at a base URL that does not parse: no error")
	}
	if _, err := c.OpenStep(bg, "r", api.OpenStepRequest{Step: 1}); err == nil {
		t.Error("OpenStep at a base URL that does not parse: no error")
	}
}
