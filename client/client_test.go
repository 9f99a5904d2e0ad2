package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/patrdb/patrdb/model"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

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
