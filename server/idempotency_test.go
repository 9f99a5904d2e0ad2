package server

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Every write endpoint, sent twice with the same client key, answers the
// second time with the first answer, byte for byte, and writes nothing.
func TestEveryWriteIsIdempotent(t *testing.T) {
	e := newEnv(t, Options{})
	type step struct {
		name, path string
		body       string
		status     int
	}
	steps := []step{
		{"create run", "/api/v1/runs", `{"client_key":"k1","id":"r1","tree":{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.5}}`, 201},
		{"open group", "/api/v1/runs/r1/groups", `{"client_key":"k2","step":1,"task":"t","prompt":"p"}`, 201},
		{"append turns", "/api/v1/runs/r1/nodes/1/turns", `{"client_key":"k3","from":0,"turns":[{"action":"a","observation":"o","reward":0.5}]}`, 200},
		{"append turns 2", "/api/v1/runs/r1/nodes/2/turns", `{"client_key":"k4","from":0,"turns":[{"action":"b","observation":"o"}]}`, 200},
		{"route", "/api/v1/runs/r1/groups/1/route", `{"client_key":"k5","scores":[{"node":1,"score":0.9},{"node":2,"score":0.1}]}`, 200},
		{"add node", "/api/v1/runs/r1/groups/1/nodes", `{"client_key":"k6","parent":1,"ordinal":5,"fork":1}`, 201},
		{"finish", "/api/v1/runs/r1/nodes/3/finish", `{"client_key":"k7","status":"completed","reward":1}`, 200},
		{"finish 2", "/api/v1/runs/r1/nodes/4/finish", `{"client_key":"k8","status":"truncated","reward":0}`, 200},
		{"finish 3", "/api/v1/runs/r1/nodes/5/finish", `{"client_key":"k9","status":"completed","reward":0}`, 200},
		{"re-reward pruned", "/api/v1/runs/r1/nodes/2/finish", `{"client_key":"k10","status":"pruned","reward":-1}`, 200},
		{"close", "/api/v1/runs/r1/groups/1/close", `{"client_key":"k11"}`, 200},
		{"checkpoint", "/api/v1/runs/r1/checkpoints", `{"client_key":"k12","step":1,"uri":"s3://ckpt/1","hash":"sha256:00"}`, 201},
		{"status", "/api/v1/runs/r1/status", `{"client_key":"k13","status":"finished"}`, 200},
	}
	for _, s := range steps {
		st, h1, first := e.call(http.MethodPost, s.path, s.body)
		if st != s.status {
			t.Fatalf("%s: %d %s", s.name, st, first)
		}
		if h1.Get("Idempotent-Replay") != "" {
			t.Fatalf("%s: first answer marked as a replay", s.name)
		}
		before := e.dump()
		// Same request, same key, different spacing and member order.
		again := []byte(s.body)
		again = bytes.Replace(again, []byte(`,`), []byte(`, `), -1)
		st2, h2, second := e.call(http.MethodPost, s.path, again)
		if st2 != st || !bytes.Equal(first, second) || h2.Get("Idempotent-Replay") != "true" {
			t.Fatalf("%s: retry got %d %s (replay %q), first %d %s", s.name, st2, second, h2.Get("Idempotent-Replay"), st, first)
		}
		if e.dump() != before {
			t.Fatalf("%s: the retry wrote", s.name)
		}
	}
	// The key of a used request with a different body is a conflict.
	before := e.fileSum()
	st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/status", `{"client_key":"k13","status":"failed"}`)
	if st != http.StatusConflict || e.fileSum() != before {
		t.Fatalf("key reuse: %d %s", st, body)
	}
	// The same key on another endpoint too.
	st, _, body = e.call(http.MethodPost, "/api/v1/runs/r1/checkpoints", `{"client_key":"k13","step":2,"uri":"x"}`)
	if st != http.StatusConflict || e.fileSum() != before {
		t.Fatalf("key reuse across endpoints: %d %s", st, body)
	}
	// The (group, parent, ordinal) identity holds without the key too.
	var an AddNodeResponse
	e.post("/api/v1/runs/r1/groups/1/nodes", `{"client_key":"other","parent":1,"ordinal":5,"fork":1}`, http.StatusConflict, nil) // group closed
	_ = an
}

// Node creation is keyed by (group, parent, ordinal): a second request for
// the same ordinal, under a new client key, returns the node that exists.
func TestAddNodeByOrdinal(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	e.post("/api/v1/runs/r1/groups", `{"client_key":"g","step":1}`, 201, nil)
	var a, b AddNodeResponse
	e.post("/api/v1/runs/r1/groups/1/nodes", `{"client_key":"a","parent":0,"ordinal":7}`, 201, &a)
	e.post("/api/v1/runs/r1/groups/1/nodes", `{"client_key":"b","parent":0,"ordinal":7}`, 200, &b)
	if !a.Created || b.Created || a.Node.ID != b.Node.ID {
		t.Fatalf("first %+v second %+v", a, b)
	}
	e.post("/api/v1/runs/r1/nodes/1/turns", `{"client_key":"t","from":0,"turns":[{"action":"x","observation":"y"}]}`, 200, nil)
	e.post("/api/v1/runs/r1/groups/1/nodes", `{"client_key":"c","parent":1,"ordinal":0,"fork":1}`, 201, &a)
	before := e.fileSum()
	e.post("/api/v1/runs/r1/groups/1/nodes", `{"client_key":"d","parent":1,"ordinal":0,"fork":0}`, 409, nil)
	if e.fileSum() != before {
		t.Fatal("a conflicting ordinal wrote")
	}
}

// Concurrent retries of one request write it once.
func TestConcurrentRetriesWriteOnce(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	e.post("/api/v1/runs/r1/groups", `{"client_key":"g","step":1}`, 201, nil)
	seq := e.lastSeq("r1")
	var wg sync.WaitGroup
	bodies := make([][]byte, 8)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, bodies[i] = e.call(http.MethodPost, "/api/v1/runs/r1/groups", `{"client_key":"same","step":2}`)
		}()
	}
	wg.Wait()
	for _, b := range bodies[1:] {
		if !bytes.Equal(b, bodies[0]) {
			t.Fatalf("answers differ: %s vs %s", b, bodies[0])
		}
	}
	// One group.open, three node.add, one reply.
	if got := e.lastSeq("r1") - seq; got != 5 {
		t.Fatalf("%d events written, want 5", got)
	}
	var groups struct{ Groups []store.Group }
	e.get("/api/v1/runs/r1/steps/2/groups", &groups)
	if len(groups.Groups) != 1 {
		t.Fatalf("%d groups at step 2", len(groups.Groups))
	}
}

// The reply index survives a restart: a new handler over the reopened file
// finds the first answer in the log.
func TestRetryAfterRestart(t *testing.T) {
	db := storetest.Open(t)
	path := db.Path()
	e := newEnvDB(t, db, Options{})
	createRun(e, "r1", testTree)
	first := e.post("/api/v1/runs/r1/groups", `{"client_key":"g","step":1}`, 201, nil)
	e.srv.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := storetest.OpenPath(t, path, storetest.Options())
	e2 := newEnvDB(t, db2, Options{})
	seq := e2.lastSeq("r1")
	st, h, again := e2.call(http.MethodPost, "/api/v1/runs/r1/groups", `{"client_key":"g","step":1}`)
	if st != 201 || !bytes.Equal(first, again) || h.Get("Idempotent-Replay") != "true" || e2.lastSeq("r1") != seq {
		t.Fatalf("after restart: %d %s (first %s)", st, again, first)
	}
	// Replies are ordinary events, readable in the log.
	var page EventPage
	e2.get(fmt.Sprintf("/api/v1/runs/r1/events?from=%d", seq), &page)
	if len(page.Events) != 1 || page.Events[0].Kind != KindReply {
		t.Fatalf("last event: %+v", page.Events)
	}
	p, _ := page.Events[0].Payload.(map[string]any)
	if p["client_key"] != "g" || p["status"] != float64(201) {
		t.Fatalf("reply payload: %+v", p)
	}
}
