package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Each bad request gets a 4xx with one line of JSON naming the problem, and
// the file stays byte for byte as it was.
func TestBadInputWritesNothing(t *testing.T) {
	e := newEnv(t, Options{MaxBodyBytes: 4096})
	createRun(e, "r1", testTree)
	gid, r, _ := grow(e, "r1", 1) // group 1: r[0] expanded, r[1] and children finished, r[2] pruned
	e.post("/api/v1/runs/r1/groups/1/close", `{"client_key":"close1"}`, 200, nil)
	var og OpenGroupResponse
	e.post("/api/v1/runs/r1/groups", `{"client_key":"open2","step":2}`, 201, &og) // group 2: three active roots
	a := og.Roots
	_ = gid
	_ = r
	e.post("/api/v1/runs/r1/nodes/"+u64(a[0])+"/turns", `{"client_key":"t2","from":0,"turns":[{"action":"a","observation":"o"}]}`, 200, nil)
	e.post("/api/v1/runs", `{"client_key":"plain","id":"plain"}`, 201, nil) // default config
	big := `{"client_key":"big","from":0,"turns":[{"action":"` + strings.Repeat("x", 5000) + `","observation":""}]}`
	n := "/api/v1/runs/r1/nodes/" + u64(a[0])
	g2 := "/api/v1/runs/r1/groups/" + u64(og.Group.ID)
	cases := []struct {
		name, path, ct, body string
		status               int
	}{
		{"malformed JSON", "/api/v1/runs/r1/groups", "", `{"client_key":"x","step":`, 400},
		{"not an object", "/api/v1/runs/r1/groups", "", `[1,2]`, 400},
		{"unknown field", "/api/v1/runs/r1/groups", "", `{"client_key":"x","step":3,"bogus":1}`, 400},
		{"wrong type", "/api/v1/runs/r1/groups", "", `{"client_key":"x","step":"three"}`, 400},
		{"negative step", "/api/v1/runs/r1/groups", "", `{"client_key":"x","step":-3}`, 400},
		{"trailing data", "/api/v1/runs/r1/groups", "", `{"client_key":"x","step":3}{"step":4}`, 400},
		{"empty body", "/api/v1/runs/r1/groups", "", ``, 400},
		{"no client key", "/api/v1/runs/r1/groups", "", `{"step":3}`, 400},
		{"client key with a space", "/api/v1/runs/r1/groups", "", `{"client_key":"a b","step":3}`, 400},
		{"text/plain body", "/api/v1/runs/r1/groups", "text/plain", `{"client_key":"x","step":3}`, 415},
		{"no content type", "/api/v1/runs/r1/groups", "none", `{"client_key":"x","step":3}`, 415},
		{"body over the cap", n + "/turns", "", big, 413},
		{"step 0", "/api/v1/runs/r1/groups", "", `{"client_key":"x","step":0}`, 400},
		{"unknown run", "/api/v1/runs/nope/groups", "", `{"client_key":"x","step":3}`, 404},
		{"bad run id", "/api/v1/runs/a%20b/groups", "", `{"client_key":"x","step":3}`, 400},
		{"run without tree config", "/api/v1/runs/plain/groups", "", `{"client_key":"x","step":1}`, 201}, // defaults are stored: allowed
		{"NaN score", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `,"score":NaN}]}`, 400},
		{"score above 1", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `,"score":1.5},{"node":` + u64(a[1]) + `,"score":0.5},{"node":` + u64(a[2]) + `,"score":0.5}]}`, 400},
		{"negative score", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `,"score":-0.1}]}`, 400},
		{"score missing", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `}]}`, 400},
		{"score as string", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `,"score":"0.5"}]}`, 400},
		{"active node unscored", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `,"score":0.5}]}`, 400},
		{"node scored twice", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(a[0]) + `,"score":0.5},{"node":` + u64(a[0]) + `,"score":0.5}]}`, 400},
		{"unknown node in scores", g2 + "/route", "", `{"client_key":"x","scores":[{"node":999,"score":0.5}]}`, 404},
		{"node of another group", g2 + "/route", "", `{"client_key":"x","scores":[{"node":` + u64(r[1]) + `,"score":0.5}]}`, 400},
		{"stale interval", g2 + "/route", "", `{"client_key":"x","interval":3,"scores":[{"node":` + u64(a[0]) + `,"score":0.5},{"node":` + u64(a[1]) + `,"score":0.5},{"node":` + u64(a[2]) + `,"score":0.5}]}`, 409},
		{"route a closed group", "/api/v1/runs/r1/groups/1/route", "", `{"client_key":"x","scores":[{"node":1,"score":0.5}]}`, 409},
		{"unknown group", "/api/v1/runs/r1/groups/99/route", "", `{"client_key":"x","scores":[{"node":1,"score":0.5}]}`, 404},
		{"group id not a number", "/api/v1/runs/r1/groups/abc/route", "", `{"client_key":"x","scores":[{"node":1,"score":0.5}]}`, 400},
		{"group id 0", "/api/v1/runs/r1/groups/0/close", "", `{"client_key":"x"}`, 400},
		{"turns without from", n + "/turns", "", `{"client_key":"x","turns":[{"action":"a","observation":"o"}]}`, 400},
		{"turns negative from", n + "/turns", "", `{"client_key":"x","from":-1,"turns":[{"action":"a","observation":"o"}]}`, 400},
		{"turns leave a gap", n + "/turns", "", `{"client_key":"x","from":5,"turns":[{"action":"a","observation":"o"}]}`, 409},
		{"no turns", n + "/turns", "", `{"client_key":"x","from":1,"turns":[]}`, 400},
		{"turn reward overflows", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"a","observation":"o","reward":1e400}]}`, 400},
		{"logprobs of the wrong type", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"a","observation":"o","action_logprobs":["a"]}]}`, 400},
		{"token id negative", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"a","observation":"o","action_tokens":[-1]}]}`, 400},
		{"unknown turn field", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"a","obs":"o"}]}`, 400},
		{"turns to a finished node", "/api/v1/runs/r1/nodes/" + u64(r[1]) + "/turns", "", `{"client_key":"x","from":3,"turns":[{"action":"a","observation":"o"}]}`, 409},
		{"turns to an unknown node", "/api/v1/runs/r1/nodes/999/turns", "", `{"client_key":"x","from":0,"turns":[{"action":"a","observation":"o"}]}`, 404},
		{"finish with a bad status", n + "/finish", "", `{"client_key":"x","status":"expanded","reward":1}`, 400},
		{"finish without reward", n + "/finish", "", `{"client_key":"x","status":"completed"}`, 400},
		{"finish a finished node", "/api/v1/runs/r1/nodes/" + u64(r[1]) + "/finish", "", `{"client_key":"x","status":"completed","reward":1}`, 409},
		{"re-reward an active node as pruned", n + "/finish", "", `{"client_key":"x","status":"pruned","reward":1}`, 409},
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
		{"add node under a missing parent", g2 + "/nodes", "", `{"client_key":"x","parent":999,"ordinal":0}`, 404},
		{"add node forking past the parent", g2 + "/nodes", "", `{"client_key":"x","parent":` + u64(a[0]) + `,"ordinal":0,"fork":9}`, 400},
		{"add node negative ordinal", g2 + "/nodes", "", `{"client_key":"x","parent":0,"ordinal":-1}`, 400},
		// encoding/json would store these as U+FFFD without a word.
		{"invalid UTF-8 in a turn", n + "/turns", "", "{\"client_key\":\"x\",\"from\":1,\"turns\":[{\"action\":\"a\xff\xfeb\",\"observation\":\"o\"}]}", 400},
		{"truncated UTF-8 sequence", n + "/turns", "", "{\"client_key\":\"x\",\"from\":1,\"turns\":[{\"action\":\"caf\xc3\",\"observation\":\"o\"}]}", 400},
		{"lone high surrogate escape", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"a\ud800","observation":"o"}]}`, 400},
		{"lone low surrogate escape", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"a","observation":"\uDC00o"}]}`, 400},
		{"high surrogate before a non-surrogate", n + "/turns", "", `{"client_key":"x","from":1,"turns":[{"action":"\ud800\u0041","observation":"o"}]}`, 400},
		{"an escaped backslash before u is not an escape", n + "/turns", "", `{"client_key":"bs","from":1,"turns":[{"action":"a\\ud800","observation":"o"}]}`, 200},
		{"a surrogate pair is fine", n + "/turns", "", `{"client_key":"pair","from":2,"turns":[{"action":"\ud83d\ude00","observation":"o"}]}`, 200},
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
	st, h, body = e.call(http.MethodGet, "/api/v1/runs/r1/groups/1/route", nil)
	if st != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Errorf("GET route: %d Allow %q %s", st, h.Get("Allow"), body)
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
	var hl Health
	e.get("/api/v1/health", &hl)
	if !hl.ReadOnly {
		t.Error("health does not say read-only")
	}
}
