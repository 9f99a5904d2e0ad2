package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// BenchmarkFirstWriteAfterRestart measures the first write a new server
// (a restart: nothing of the old one's memory) takes on a run whose log
// holds many events and a thousand earlier replies, against the second
// write of the same server, measured beside it: a server that must read
// the whole log to find a client key's earlier answer pays for it on the
// first write; one that looks the key up pays what every write pays. With
// check=on the new server also checks the run once, as it does before
// serving a file it did not write (sound.go); check=off leaves that out,
// so the figure is the replies' alone. Reported: the median of each write
// and their ratio.
func BenchmarkFirstWriteAfterRestart(b *testing.B) {
	for _, c := range []struct {
		events int
		check  bool
	}{{10_000, false}, {100_000, false}, {100_000, true}} {
		name := fmt.Sprintf("events=%d/check=%s", c.events, map[bool]string{true: "on", false: "off"}[c.check])
		b.Run(name, func(b *testing.B) {
			db := storetest.Open(b)
			restart := func() http.Handler {
				h, err := NewHandler(db, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if !c.check {
					h.(*server).verify = func(tx *store.Tx, id string) (bool, error) {
						_, err := tx.Run(id)
						return err == nil, nil
					}
				}
				return h
			}
			post := func(h http.Handler, path, body string) {
				w := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				h.ServeHTTP(w, req)
				if w.Code >= 300 {
					b.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
				}
			}
			h := restart()
			post(h, "/api/v1/runs", `{"client_key":"create","id":"r"}`)
			for i := range 1000 { // earlier answered writes
				post(h, "/api/v1/runs/r/status", fmt.Sprintf(`{"client_key":"old-%d","status":"running"}`, i))
			}
			for done := 0; done < c.events; done += 10_000 { // the rest of a long run's log
				if err := db.Update(func(tx *store.Tx) error {
					r, err := tx.Run("r")
					if err != nil {
						return err
					}
					for i := range 10_000 {
						if _, err := r.AppendEvent("bench.note", 1, 0, uint64(i), 0, nil); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			var first, second []time.Duration
			n := 0
			for b.Loop() {
				h := restart()
				for _, to := range []*[]time.Duration{&first, &second} {
					n++
					start := time.Now()
					post(h, "/api/v1/runs/r/status", fmt.Sprintf(`{"client_key":"k-%d","status":"running"}`, n))
					*to = append(*to, time.Since(start))
				}
			}
			f, s := median(first), median(second)
			b.ReportMetric(float64(f.Microseconds()), "first-µs")
			b.ReportMetric(float64(s.Microseconds()), "second-µs")
			b.ReportMetric(float64(f)/float64(s), "first/second")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkSubmitFingerprint: the fingerprint of one submit of 40
// LLM-shaped turns (400 action tokens with logprobs, a 2 KB observation
// with 500 tokens), re-encoded whole as JSON (fingerprint, what every
// submit paid before) and with its turns written in binary
// (submitFingerprint).
//
//	go test ./server -run '^$' -bench SubmitFingerprint -count 5
func BenchmarkSubmitFingerprint(b *testing.B) {
	req := llmSubmit()
	path := "/api/v1/runs/r/submit"
	b.Run("whole-request-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := fingerprint(submitPattern, path, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("turns-in-binary", func(b *testing.B) {
		for b.Loop() {
			if _, err := submitFingerprint(submitPattern, path, req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// llmSubmit is one submit of 40 LLM-shaped turns: 8 branches of 5 turns,
// each 400 action tokens with logprobs and a 2 KB observation with 500
// tokens.
func llmSubmit() *api.SubmitRequest {
	req := &api.SubmitRequest{Keyed: api.Keyed{ClientKey: "k"}}
	for s := range 8 {
		sub := rollout.Submission{Lease: fmt.Sprint("lease-", s), Worker: "w", Node: uint64(s + 1)}
		for range 5 {
			t := model.Turn{Action: strings.Repeat("act ", 400), Observation: strings.Repeat("observe ", 256)}
			for i := range 400 {
				t.ActionTokens = append(t.ActionTokens, uint32(i*7919))
				t.ActionLogprobs = append(t.ActionLogprobs, -float32(i)/397)
			}
			for i := range 500 {
				t.ObservationTokens = append(t.ObservationTokens, uint32(i*104729))
			}
			sub.Turns = append(sub.Turns, t)
		}
		req.Submissions = append(req.Submissions, sub)
	}
	return req
}
