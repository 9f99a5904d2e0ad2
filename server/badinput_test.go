package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
)

// Each bad request gets a 4xx with one line of JSON naming the problem, and
// the file stays byte for byte as it was.
func TestBadInputWritesNothing(t *testing.T) {
	e := newEnv(t, Options{MaxBodyBytes: 4096})
	createRun(e, "r1", testTree)
	grow(e, "r1", 1) // group 1: r[0] expanded, r[1] and children finished, r[2] pruned
	e.post("/api/v1/runs/r1/groups/1/close", `{"client_key":"close1"}`, 200, nil)
	g := openStep(e, "r1", 2) // group 2: three active roots
	a := g.Roots
	ls := leaseAll(e, "r1", 2)
	submitOK(e, "r1", "t2", sub(ls[a[0]], nil, turn("a", 0)))
	e.post("/api/v1/runs", `{"client_key":"plain","id":"plain"}`, 201, nil) // default config
	l1 := `"lease":"` + ls[a[1]].ID + `","worker":"test","node":` + u64(a[1]) + `,"from":0`
	submit := func(sub string) string { return `{"client_key":"x","submissions":[{` + l1 + sub + `}]}` }
	two := `,"turns":[{"action":"a","observation":"o"},{"action":"b","observation":"o"}]`
	big := submit(`,"turns":[{"action":"` + strings.Repeat("x", 5000) + `","observation":""}]`)
	steps := "/api/v1/runs/r1/steps"
	g2 := "/api/v1/runs/r1/groups/" + u64(g.ID)
	cases := []struct {
		name, path, ct, body string
		status               int
	}{
		{"malformed JSON", steps, "", `{"client_key":"x","step":`, 400},
		{"not an object", steps, "", `[1,2]`, 400},
		{"unknown field", steps, "", `{"client_key":"x","step":3,"bogus":1}`, 400},
		{"wrong type", steps, "", `{"client_key":"x","step":"three"}`, 400},
		{"negative step", steps, "", `{"client_key":"x","step":-3,"tasks":[{"id":"t"}]}`, 400},
		{"trailing data", steps, "", `{"client_key":"x","step":3}{"step":4}`, 400},
		{"empty body", steps, "", ``, 400},
		{"no client key", steps, "", `{"step":3,"tasks":[{"id":"t"}]}`, 400},
		{"client key with a space", steps, "", `{"client_key":"a b","step":3,"tasks":[{"id":"t"}]}`, 400},
		{"text/plain body", steps, "text/plain", `{"client_key":"x","step":3}`, 415},
		{"no content type", steps, "none", `{"client_key":"x","step":3}`, 415},
		{"step 0", steps, "", `{"client_key":"x","step":0,"tasks":[{"id":"t"}]}`, 400},
		{"no tasks", steps, "", `{"client_key":"x","step":3,"tasks":[]}`, 400},
		{"unknown run", "/api/v1/runs/nope/steps", "", `{"client_key":"x","step":3,"tasks":[{"id":"t"}]}`, 404},
		{"bad run id", "/api/v1/runs/a%20b/steps", "", `{"client_key":"x","step":3,"tasks":[{"id":"t"}]}`, 400},
		{"run without tree config", "/api/v1/runs/plain/steps", "", `{"client_key":"x","step":1,"tasks":[{"id":"t"}]}`, 200}, // defaults are stored: allowed
		{"body over the cap", "/api/v1/runs/r1/submit", "", big, 413},
		{"no submissions", "/api/v1/runs/r1/submit", "", `{"client_key":"x","submissions":[]}`, 400},
		{"NaN score", "/api/v1/runs/r1/submit", "", submit(two + `,"score":NaN`), 400},
		{"score above 1", "/api/v1/runs/r1/submit", "", submit(two + `,"score":1.5`), 400},
		{"negative score", "/api/v1/runs/r1/submit", "", submit(two + `,"score":-0.1`), 400},
		{"score as string", "/api/v1/runs/r1/submit", "", submit(two + `,"score":"0.5"`), 400},
		{"unknown node", "/api/v1/runs/r1/submit", "", `{"client_key":"x","submissions":[{"lease":"l","node":999,"from":0}]}`, 404},
		{"turn reward overflows", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o","reward":1e400}]`), 400},
		{"logprobs of the wrong type", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o","action_logprobs":["a"]}]`), 400},
		{"more logprobs than tokens", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o","action_tokens":[1],"action_logprobs":[-1,-2]}]`), 400},
		{"positive logprob", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o","action_tokens":[1],"action_logprobs":[0.5]}]`), 400},
		{"token id negative", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o","action_tokens":[-1]}]`), 400},
		{"unknown turn field", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","obs":"o"}]`), 400},
		{"done turn followed by another", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o","done":true},{"action":"b","observation":"o"}]`), 400},
		{"reward on a branch that goes on", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o"}],"reward":1`), 400},
		{"failure with turns", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"o"}],"error":"boom"`), 400},
		{"negative lease max", "/api/v1/runs/r1/leases", "", `{"worker":"w","max":-1}`, 400},
		{"negative lease ttl", "/api/v1/runs/r1/leases", "", `{"worker":"w","ttl_ms":-5}`, 400},
		{"lease ttl over a day", "/api/v1/runs/r1/leases", "", `{"worker":"w","ttl_ms":100000000}`, 400},
		{"lease from an unknown run", "/api/v1/runs/nope/leases", "", `{"worker":"w"}`, 404},
		{"abandon without a reason", "/api/v1/runs/r1/steps/2/abandon", "", `{"client_key":"x"}`, 400},
		{"abandon step 0", "/api/v1/runs/r1/steps/0/abandon", "", `{"client_key":"x","reason":"r"}`, 400},
		{"close an unknown group", "/api/v1/runs/r1/groups/99/close", "", `{"client_key":"x"}`, 404},
		{"group id not a number", "/api/v1/runs/r1/groups/abc/close", "", `{"client_key":"x"}`, 400},
		{"close with active nodes", g2 + "/close", "", `{"client_key":"x"}`, 409},
		{"close a closed group", "/api/v1/runs/r1/groups/1/close", "", `{"client_key":"x"}`, 409},
		{"rubric score outside [-1,1]", g2 + "/close", "", `{"client_key":"x","rubric_scores":[{"leaf":1,"score":2}]}`, 400},
		{"negative lambda", g2 + "/close", "", `{"client_key":"x","rubric_scores":[{"leaf":1,"score":0}],"lambda":-1}`, 400},
		{"lambda without scores", g2 + "/close", "", `{"client_key":"x","lambda":0.5}`, 400},
		{"bad run id on create", "/api/v1/runs", "", `{"client_key":"x","id":"no spaces"}`, 400},
		{"bad tree config", "/api/v1/runs", "", `{"client_key":"x","id":"r9","tree":{"k":0,"prune_rule":"min"}}`, 400},
		{"unknown tree field", "/api/v1/runs", "", `{"client_key":"x","id":"r9","tree":{"kk":3}}`, 400},
		{"bad rubric config", "/api/v1/runs", "", `{"client_key":"x","id":"r9","rubric":{"lambda":-1}}`, 400},
		{"duplicate run", "/api/v1/runs", "", `{"client_key":"x","id":"r1"}`, 409},
		{"bad run status", "/api/v1/runs/r1/status", "", `{"client_key":"x","status":"paused"}`, 400},
		{"checkpoint step 0", "/api/v1/runs/r1/checkpoints", "", `{"client_key":"x","step":0,"uri":"u"}`, 400},
		{"empty checkpoint", "/api/v1/runs/r1/checkpoints", "", `{"client_key":"x","step":1}`, 400},
		{"inline not base64", "/api/v1/runs/r1/checkpoints", "", `{"client_key":"x","step":1,"inline":"!!"}`, 400},
		// encoding/json would store these as U+FFFD without a word.
		{"invalid UTF-8 in a turn", "/api/v1/runs/r1/submit", "", submit(",\"turns\":[{\"action\":\"a\xff\xfeb\",\"observation\":\"o\"}]"), 400},
		{"truncated UTF-8 sequence", "/api/v1/runs/r1/submit", "", submit(",\"turns\":[{\"action\":\"caf\xc3\",\"observation\":\"o\"}]"), 400},
		{"lone high surrogate escape", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a\ud800","observation":"o"}]`), 400},
		{"lone low surrogate escape", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"a","observation":"\uDC00o"}]`), 400},
		{"high surrogate before a non-surrogate", "/api/v1/runs/r1/submit", "", submit(`,"turns":[{"action":"\ud800\u0041","observation":"o"}]`), 400},
		{"an escaped backslash before u is not an escape", "/api/v1/runs/r1/submit", "", `{"client_key":"bs","submissions":[{` + l1 + `,"turns":[{"action":"a\\ud800","observation":"o"}]}]}`, 200},
		{"a surrogate pair is fine", "/api/v1/runs/r1/submit", "", `{"client_key":"pair","submissions":[{"lease":"` + ls[a[1]].ID + `","worker":"test","node":` + u64(a[1]) + `,"from":1,"turns":[{"action":"\ud83d\ude00","observation":"o"}]}]}`, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			beforeSum, beforeDump := e.fileSum(), e.dump()
			ct := c.ct
			switch ct {
			case "":
				ct = "application/json"
			case "none":
				ct = ""
			}
			st, h, body := e.callCT(http.MethodPost, c.path, ct, c.body)
			if st != c.status {
				t.Fatalf("status %d, want %d: %s", st, c.status, body)
			}
			if st < 400 {
				return // the control case
			}
			if e.fileSum() != beforeSum || e.dump() != beforeDump {
				t.Fatal("the refused request changed the file")
			}
			assertErrorBody(t, h, body)
			for _, word := range []string{"UTF-8", "surrogate"} {
				if strings.Contains(c.name, word) && !bytes.Contains(body, []byte(word)) {
					t.Errorf("refused for another reason: %s", body)
				}
			}
		})
	}
}

func assertErrorBody(t *testing.T, h http.Header, body []byte) {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type %q", ct)
	}
	if bytes.Count(bytes.TrimSpace(body), []byte("\n")) != 0 {
		t.Errorf("error body is not one line: %q", body)
	}
	var eb struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error == "" || eb.Code == "" {
		t.Errorf("error body %q: %v", body, err)
	}
}

// Reads refuse bad ids and queries the same way.
func TestBadReads(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	cases := []struct {
		path   string
		status int
	}{
		{"/api/v1/runs/nope", 404},
		{"/api/v1/runs/bad%20id", 400},
		{"/api/v1/runs/bad%20id/groups/1", 400},
		{"/api/v1/runs/bad%20id/nodes/1", 400},
		{"/api/v1/runs/nope/groups/1", 404},
		{"/api/v1/runs/r1/nodes/7", 404},
		{"/api/v1/runs/r1/nodes/x", 400},
		{"/api/v1/runs/r1/nodes/7/trajectory", 404},
		{"/api/v1/runs/r1/groups/3", 404},
		{"/api/v1/runs/r1/steps/0/groups", 400},
		{"/api/v1/runs/r1/rubrics?pool=gold", 400},
		{"/api/v1/runs/r1/advantages?step=x", 400},
		{"/api/v1/runs/r1/advantages?group=1", 400},
		{"/api/v1/runs/r1/events?limit=0", 400},
		{"/api/v1/runs/r1/events?limit=100000", 400},
		{"/api/v1/runs/r1?buckets=maybe", 400},
		{"/api/v1/runs?steps=2", 400},
		{"/api/v1/runs/r1/events?from=-1", 400},
		{"/api/v1/runs/r1/checkpoint", 404},
		{"/api/v1/stats?run=nope", 404},
		{"/api/v1/nothing", 404},
	}
	for _, c := range cases {
		st, h, body := e.call(http.MethodGet, c.path, nil)
		if st != c.status {
			t.Errorf("GET %s: %d, want %d: %s", c.path, st, c.status, body)
			continue
		}
		assertErrorBody(t, h, body)
	}
	// Wrong method: 405 with Allow, as JSON.
	st, h, body := e.call(http.MethodDelete, "/api/v1/runs/r1", nil)
	if st != http.StatusMethodNotAllowed || h.Get("Allow") != "GET" {
		t.Errorf("DELETE a run: %d Allow %q %s", st, h.Get("Allow"), body)
	}
	assertErrorBody(t, h, body)
	st, h, body = e.call(http.MethodGet, "/api/v1/runs/r1/submit", nil)
	if st != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Errorf("GET submit: %d Allow %q %s", st, h.Get("Allow"), body)
	}
}

// A read-only server refuses every write with 403 and writes nothing.
func TestReadOnlyServer(t *testing.T) {
	e := newEnv(t, Options{ReadOnly: true})
	before := e.fileSum()
	st, h, body := e.call(http.MethodPost, "/api/v1/runs", `{"client_key":"x","id":"r1"}`)
	if st != http.StatusForbidden || e.fileSum() != before {
		t.Fatalf("%d %s", st, body)
	}
	assertErrorBody(t, h, body)
	var hl api.Health
	e.get("/api/v1/health", &hl)
	if !hl.ReadOnly {
		t.Error("health does not say read-only")
	}
}
