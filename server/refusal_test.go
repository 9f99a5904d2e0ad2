package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store/storetest"
)

// Each rule of the rollout protocol, broken over HTTP: the request is
// refused with its status and code, and the file stays byte for byte as
// it was.

// refused sends body to path and requires the status and error code, and
// that nothing was written.
func refused(e *testEnv, path string, body any, status int, code string) {
	e.t.Helper()
	sum, dump := e.fileSum(), e.dump()
	st, h, data := e.call(http.MethodPost, path, body)
	if st != status {
		e.t.Fatalf("POST %s: %d, want %d: %s", path, st, status, data)
	}
	assertErrorBody(e.t, h, data)
	var eb api.ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Code != code {
		e.t.Fatalf("POST %s: code %q, want %q: %s", path, eb.Code, code, data)
	}
	if e.fileSum() != sum || e.dump() != dump {
		e.t.Fatalf("POST %s: the refused request changed the file", path)
	}
}

// refusalEnv is a run with K=2 and one open step of one task, its three
// roots leased to worker "a".
func refusalEnv(t *testing.T) (*testEnv, model.Group, map[uint64]api.LeaseGrant) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	g := openStep(e, "r1", 1)
	return e, g, leaseAll(e, "r1", 1)
}

func submitReq(key string, subs ...rollout.Submission) api.SubmitRequest {
	return api.SubmitRequest{Keyed: api.Keyed{ClientKey: key}, Submissions: subs}
}

func TestRefuseExpiredLeaseHandedOn(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	g := openStep(e, "r1", 1)
	var a, b api.LeaseResponse
	e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "a", TTLMs: 1}, http.StatusOK, &a) // every root, for 1 ms
	time.Sleep(5 * time.Millisecond)
	e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "b", Max: 1}, http.StatusOK, &b)
	if len(a.Leases) != len(g.Roots) || len(b.Leases) != 1 || a.Leases[0].Node != g.Roots[0] || b.Leases[0].Node != g.Roots[0] {
		t.Fatalf("the expired lease was not handed on: a %+v, b %+v", a.Leases, b.Leases)
	}
	refused(e, "/api/v1/runs/r1/submit", submitReq("late", sub(a.Leases[0], nil, turn("x", 0))), http.StatusConflict, "lease_lost")
	submitOK(e, "r1", "current", sub(b.Leases[0], nil, turn("y", 0)))
	// A lease still held is not handed out again.
	var c api.LeaseResponse
	e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "c", Max: 1}, http.StatusOK, &c)
	if len(c.Leases) != 1 || c.Leases[0].Node != g.Roots[1] {
		t.Fatalf("worker c got %+v, want root %d", c.Leases, g.Roots[1])
	}
}

func TestRefuseWrongFrom(t *testing.T) {
	e, g, ls := refusalEnv(t)
	l := ls[g.Roots[0]]
	s := sub(l, nil, turn("x", 0))
	s.From = 1 // a gap after the node's 0 turns
	refused(e, "/api/v1/runs/r1/submit", submitReq("gap", s), http.StatusConflict, "lease_lost")
	submitOK(e, "r1", "first", sub(l, nil, turn("x", 0)))
	// Sending the same first turn again under a new key: from 0 is stale.
	refused(e, "/api/v1/runs/r1/submit", submitReq("again", sub(l, nil, turn("x2", 0))), http.StatusConflict, "lease_lost")
}

func TestRefuseAfterDone(t *testing.T) {
	e, g, ls := refusalEnv(t)
	l := ls[g.Roots[0]]
	submitOK(e, "r1", "end", sub(l, nil, done(turn("stop", 1))))
	s := sub(l, nil, turn("more", 0))
	s.From = 1
	refused(e, "/api/v1/runs/r1/submit", submitReq("more", s), http.StatusConflict, "branch_ended")
	s.Turns = nil
	s.Score = ptr(0.5)
	refused(e, "/api/v1/runs/r1/submit", submitReq("score", s), http.StatusConflict, "branch_ended")
}

func TestRefuseScoreBeforeK(t *testing.T) {
	e, g, ls := refusalEnv(t)
	// K is 2: a score after one turn is too early.
	refused(e, "/api/v1/runs/r1/submit", submitReq("early", sub(ls[g.Roots[0]], ptr(0.5), turn("x", 0))), http.StatusConflict, "too_early")
	// Three turns overrun the interval.
	refused(e, "/api/v1/runs/r1/submit", submitReq("long", sub(ls[g.Roots[0]], nil, turn("x", 0), turn("y", 0), turn("z", 0))), http.StatusConflict, "conflict")
	submitOK(e, "r1", "ok", sub(ls[g.Roots[0]], ptr(0.5), turn("x", 0), turn("y", 0)))
}

func TestRefuseReopenStepWithOtherTasks(t *testing.T) {
	e, g, _ := refusalEnv(t)
	refused(e, "/api/v1/runs/r1/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "other"}, Step: 1, Tasks: []rollout.Task{{ID: "t2", Prompt: "another"}}},
		http.StatusConflict, "step_exists")
	// The same tasks again (a restarted driver, under a new key) get the
	// same group back, and write nothing but the reply.
	again := openStepWithKey(e, "r1", 1, "again")
	if again.ID != g.ID || len(again.Roots) != 3 {
		t.Fatalf("re-opened step: %+v, first %+v", again, g)
	}
}

func openStepWithKey(e *testEnv, run string, step uint64, key string) model.Group {
	e.t.Helper()
	var os api.OpenStepResponse
	e.post("/api/v1/runs/"+run+"/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: key}, Step: step,
		Tasks: []rollout.Task{{ID: "t1", Prompt: "reach the goal", Gold: "goal"}}}, http.StatusOK, &os)
	return os.Groups[0]
}

func TestRefuseConfigMismatch(t *testing.T) {
	e, _, _ := refusalEnv(t)
	st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/steps", `{"client_key":"k","step":2,"tasks":[{"id":"t"}],"tree":{"k":5,"b0":3}}`)
	if st != http.StatusConflict || !strings.Contains(string(body), "k: 2 → 5") || strings.Contains(string(body), "b0") {
		t.Fatalf("config mismatch: %d %s", st, body)
	}
	refused(e, "/api/v1/runs/r1/steps", `{"client_key":"k","step":2,"tasks":[{"id":"t"}],"tree":{"max_turns":50}}`, http.StatusConflict, "config_mismatch")
	refused(e, "/api/v1/runs/r1/steps", `{"client_key":"k","step":2,"tasks":[{"id":"t"}],"tree":{"kk":2}}`, http.StatusBadRequest, "bad_request")
	// The recorded values are accepted.
	e.post("/api/v1/runs/r1/steps", `{"client_key":"k","step":2,"tasks":[{"id":"t"}],"tree":{"k":2,"b0":3}}`, http.StatusOK, nil)
}

func TestRefuseLogprobCount(t *testing.T) {
	e, g, ls := refusalEnv(t)
	bad := turn("x", 0)
	bad.ActionLogprobs = bad.ActionLogprobs[:2] // three tokens
	refused(e, "/api/v1/runs/r1/submit", submitReq("lp", sub(ls[g.Roots[0]], nil, bad)), http.StatusBadRequest, "invalid")
}

func TestRefuseInvalidUTF8(t *testing.T) {
	// encoding/json turns invalid UTF-8 into U+FFFD silently; only a check
	// of the raw body (decodeBody's) can refuse it.
	probe := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{\"a\":\"\xff\"}"))
	probe.Header.Set("Content-Type", "application/json")
	var v map[string]string
	if decodeBody(httptest.NewRecorder(), probe, 1<<10, &v) == nil {
		t.Skip("decodeBody does not check the raw body's UTF-8 yet")
	}
	e, g, ls := refusalEnv(t)
	l := ls[g.Roots[0]]
	body := `{"client_key":"u","submissions":[{"lease":"` + l.ID + `","worker":"` + l.Worker + `","node":` + u64(l.Node) + `,"from":0,"turns":[{"action":"a\xff","observation":"o"}]}]}`
	refused(e, "/api/v1/runs/r1/submit", body, http.StatusBadRequest, "bad_request")
}

// A file of an older format is served as it is, and a write to it is a
// 409 "needs_migration" that writes nothing: the client is told to run
// patrdb migrate, not that the server failed.
func TestRefuseWriteToOlderFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "format2.db")
	old, err := os.ReadFile("../store/testdata/format2.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnvDB(t, storetest.OpenPath(t, path, nil), Options{})
	var list struct {
		Runs []api.RunSummary `json:"runs"`
	}
	e.get("/api/v1/runs", &list)
	if len(list.Runs) == 0 || list.Runs[0].Damaged != "" {
		t.Fatalf("the older file's runs: %+v", list.Runs)
	}
	refused(e, "/api/v1/runs", `{"client_key":"k","id":"new","tree":`+testTree+`}`, http.StatusConflict, "needs_migration")
}
