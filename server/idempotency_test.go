package server

import (
	"bytes"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"sync"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store/storetest"
)

// Every write endpoint, sent twice with the same client key, answers the
// second time with the first answer, byte for byte, and writes nothing.
func TestEveryWriteIsIdempotent(t *testing.T) {
	e := newEnv(t, Options{})
	type step struct {
		name, path string
		body       func() string
		status     int
	}
	lit := func(b string) func() string { return func() string { return b } }
	// Submits name leases, which are handed out between the writes.
	lease := map[uint64]string{}
	subm := func(key string, items ...string) func() string {
		return func() string {
			ls := leaseAll(e, "r1", 1)
			for n, l := range ls {
				lease[n] = l.ID
			}
			out := `{"client_key":"` + key + `","submissions":[`
			for i, it := range items {
				var node uint64
				fmt.Sscan(it, &node)
				if i > 0 {
					out += ","
				}
				out += fmt.Sprintf(`{"lease":%q,"worker":"test","node":%d,%s}`, lease[node], node, it[len(fmt.Sprint(node))+1:])
			}
			return out + "]}"
		}
	}
	steps := []step{
		{"create run", "/api/v1/runs", lit(`{"client_key":"k1","id":"r1","tree":{"b0":2,"k":1,"m":2,"top_expand":1,"delta":0.5,"max_turns":2}}`), 201},
		{"open step", "/api/v1/runs/r1/steps", lit(`{"client_key":"k2","step":1,"tasks":[{"id":"t","prompt":"p"}]}`), 200},
		{"submit interval 0", "/api/v1/runs/r1/submit", subm("k3",
			`1 "from":0,"turns":[{"action":"a","observation":"o","reward":0.5}],"score":0.9`,
			`2 "from":0,"turns":[{"action":"b","observation":"o"}],"score":0.1`), 200},
		{"submit a leaf", "/api/v1/runs/r1/submit", subm("k4", `3 "from":0,"turns":[{"action":"c","observation":"o","done":true}],"reward":1`), 200},
		{"submit a truncated leaf", "/api/v1/runs/r1/submit", subm("k5", `4 "from":0,"turns":[{"action":"d","observation":"o"}]`), 200},
		{"close", "/api/v1/runs/r1/groups/1/close", lit(`{"client_key":"k11"}`), 200},
		{"checkpoint", "/api/v1/runs/r1/checkpoints", lit(`{"client_key":"k12","step":1,"uri":"s3://ckpt/1","hash":"sha256:00"}`), 201},
		{"open step 2", "/api/v1/runs/r1/steps", lit(`{"client_key":"k14","step":2,"tasks":[{"id":"t","prompt":"p"}]}`), 200},
		{"abandon step 2", "/api/v1/runs/r1/steps/2/abandon", lit(`{"client_key":"k15","reason":"the test is over"}`), 200},
		{"status", "/api/v1/runs/r1/status", lit(`{"client_key":"k13","status":"finished"}`), 200},
	}
	for _, s := range steps {
		body := s.body()
		st, h1, first := e.call(http.MethodPost, s.path, body)
		if st != s.status {
			t.Fatalf("%s: %d %s", s.name, st, first)
		}
		if h1.Get("Idempotent-Replay") != "" {
			t.Fatalf("%s: first answer marked as a replay", s.name)
		}
		before := e.dump()
		// Same request, same key, different spacing and member order.
		again := []byte(body)
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
}

// Concurrent retries of one request write it once.
func TestConcurrentRetriesWriteOnce(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	openStep(e, "r1", 1)
	seq := e.lastSeq("r1")
	var wg sync.WaitGroup
	bodies := make([][]byte, 8)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, bodies[i] = e.call(http.MethodPost, "/api/v1/runs/r1/steps", `{"client_key":"same","step":2,"tasks":[{"id":"t"}]}`)
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
	var groups struct{ Groups []model.Group }
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
	first := e.post("/api/v1/runs/r1/steps", `{"client_key":"g","step":1,"tasks":[{"id":"t"}]}`, 200, nil)
	e.srv.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := storetest.OpenPath(t, path, storetest.Options())
	e2 := newEnvDB(t, db2, Options{})
	seq := e2.lastSeq("r1")
	st, h, again := e2.call(http.MethodPost, "/api/v1/runs/r1/steps", `{"client_key":"g","step":1,"tasks":[{"id":"t"}]}`)
	if st != 200 || !bytes.Equal(first, again) || h.Get("Idempotent-Replay") != "true" || e2.lastSeq("r1") != seq {
		t.Fatalf("after restart: %d %s (first %s)", st, again, first)
	}
	// Replies are ordinary events, readable in the log.
	var page api.EventPage
	e2.get(fmt.Sprintf("/api/v1/runs/r1/events?from=%d", seq), &page)
	if len(page.Events) != 1 || page.Events[0].Kind != model.EvReply {
		t.Fatalf("last event: %+v", page.Events)
	}
	p, _ := page.Events[0].Payload.(map[string]any)
	if p["client_key"] != "g" || p["status"] != float64(200) {
		t.Fatalf("reply payload: %+v", p)
	}
}
