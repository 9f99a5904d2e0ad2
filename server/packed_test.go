package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// TestPackedTokens: turns submitted packed are stored as the same turns
// submitted as arrays; leases, trajectories and pending work answer
// packed when asked, and decode to the same turns; malformed packed
// arrays are a 400 and write nothing.
func TestPackedTokens(t *testing.T) {
	e, ls, nodes := twoLeasedRoots(t)
	turns := []model.Turn{
		{Action: "a", ActionTokens: model.TokenIDs{0, 1, 1<<31 - 1}, ActionLogprobs: model.Logprobs{0, -0.5, -1e-30},
			Observation: "o", ObservationTokens: model.TokenIDs{7, 65536}, PolicyVersion: 3},
		{Action: "b", Observation: "p"}, // no tokens at all
	}
	packed := api.Packed(api.SubmitRequest{Keyed: api.Keyed{ClientKey: "packed"}, Submissions: []rollout.Submission{
		{Lease: ls[nodes[0]].ID, Worker: "test", Node: nodes[0], Turns: turns}}})
	b, _ := json.Marshal(packed)
	if !strings.Contains(string(b), `"action_tokens":"AAAAAAEAAAD///9/"`) {
		t.Fatalf("packed submit: %s", b)
	}
	e.post("/api/v1/runs/r1/submit", json.RawMessage(b), http.StatusOK, nil)
	submitOK(e, "r1", "arrays", rollout.Submission{Lease: ls[nodes[1]].ID, Worker: "test", Node: nodes[1], Turns: turns})
	for _, n := range nodes {
		var plain, pk api.Trajectory
		e.get("/api/v1/runs/r1/nodes/"+u64(n)+"/trajectory", &plain)
		e.get("/api/v1/runs/r1/nodes/"+u64(n)+"/trajectory?tokens=packed", &pk)
		if len(plain.Turns) != 2 || !reflect.DeepEqual(plain, pk) {
			t.Fatalf("node %d: arrays %+v, packed %+v", n, plain.Turns, pk.Turns)
		}
		if got := plain.Turns[0].Turn; !reflect.DeepEqual(got, turns[0]) {
			t.Fatalf("node %d stored %+v, want %+v", n, got, turns[0])
		}
	}
	st, _, body := e.call(http.MethodGet, "/api/v1/runs/r1/nodes/1/trajectory?tokens=base64", nil)
	if st != http.StatusBadRequest {
		t.Errorf("tokens=base64: %d %s", st, body)
	}
	before := e.fileSum()
	for _, bad := range []string{`"AAA"`, `"!!!!"`, `"AAAAAAE="`} { // not base64; 5 bytes
		body := `{"client_key":"bad","submissions":[{"lease":"` + ls[nodes[0]].ID + `","worker":"test","node":` + u64(nodes[0]) +
			`,"from":2,"turns":[{"action":"x","observation":"o","action_tokens":` + bad + `}]}]}`
		if st, _, out := e.call(http.MethodPost, "/api/v1/runs/r1/submit", body); st != http.StatusBadRequest {
			t.Errorf("action_tokens %s: %d %s", bad, st, out)
		}
	}
	if e.fileSum() != before {
		t.Error("a refused packed submit changed the file")
	}
}

// twoLeasedRoots is a run of two roots per group (a 2-turn interval, K 2)
// whose first step's roots are leased, by node.
func twoLeasedRoots(t *testing.T) (*testEnv, map[uint64]api.LeaseGrant, []uint64) {
	e := newEnv(t, Options{})
	createRun(e, "r1", `{"b0":2,"k":2,"m":2,"top_expand":1,"delta":0.3,"max_turns":4}`)
	openStep(e, "r1", 1)
	ls := leaseAll(e, "r1", 1)
	var nodes []uint64
	for n := range ls {
		nodes = append(nodes, n)
	}
	return e, ls, nodes
}

// A lease request whose tokens= the answer cannot be written in is a 400
// before any branch is granted: the branches go to the next request at
// once, not after the refused answer's TTL.
func TestABadTokensQueryLeasesNothing(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	g := openStep(e, "r1", 1)
	st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/leases?tokens=base64", api.LeaseRequest{Worker: "a", Step: 1})
	if st != http.StatusBadRequest {
		t.Fatalf("tokens=base64 on a lease: %d %s", st, body)
	}
	if got := leaseAll(e, "r1", 1); len(got) != len(g.Roots) {
		t.Fatalf("after the refused lease request %d of %d roots could be leased", len(got), len(g.Roots))
	}
}
