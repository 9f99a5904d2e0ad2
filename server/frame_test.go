package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// TestFrames: a submit sent as a frame stores the turns a JSON submit of
// them stores, and its retry as JSON under the same key is the same
// request (the stored answer, nothing written); a lease asked for as a
// frame carries the paths the trajectories hold; a malformed frame is a
// 400 that writes nothing, and a frame anywhere but a submit a 415.
func TestFrames(t *testing.T) {
	e, ls, nodes := twoLeasedRoots(t)
	score := 0.5
	turns := []model.Turn{
		{Action: "a ✓", ActionTokens: model.TokenIDs{0, 1, 1<<31 - 1}, ActionLogprobs: model.Logprobs{0, -0.5, -1e-30},
			Observation: "o\n\"q\"", ObservationTokens: model.TokenIDs{7, 65536}, PolicyVersion: 3},
		{Action: "b", Observation: "p"}, // no tokens at all
	}
	req := api.SubmitRequest{Keyed: api.Keyed{ClientKey: "framed"}, Submissions: []rollout.Submission{
		{Lease: ls[nodes[0]].ID, Worker: "test", Node: nodes[0], Turns: turns, Score: &score}}}
	frame, err := api.SubmitFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	st, _, first := e.callCT(http.MethodPost, "/api/v1/runs/r1/submit", api.FrameType, frame)
	if st != http.StatusOK {
		t.Fatalf("frame submit: %d %s", st, first)
	}
	before := e.fileSum()
	st, h, again := e.call(http.MethodPost, "/api/v1/runs/r1/submit", api.Packed(req))
	if st != http.StatusOK || !bytes.Equal(first, again) || h.Get("Idempotent-Replay") != "true" || e.fileSum() != before {
		t.Fatalf("JSON retry of a frame submit: %d %s (replay %q), first %s", st, again, h.Get("Idempotent-Replay"), first)
	}
	submitOK(e, "r1", "arrays", rollout.Submission{Lease: ls[nodes[1]].ID, Worker: "test", Node: nodes[1], Turns: turns, Score: &score})
	for _, n := range nodes {
		var tr api.Trajectory
		e.get("/api/v1/runs/r1/nodes/"+u64(n)+"/trajectory", &tr)
		var got []model.Turn
		for _, pt := range tr.Turns {
			got = append(got, pt.Turn)
		}
		if !reflect.DeepEqual(got, turns) {
			t.Fatalf("node %d stored %+v, want %+v", n, got, turns)
		}
	}

	// The group routed: its next branches carry their paths.
	var plain api.LeaseResponse
	e.post("/api/v1/runs/r1/leases", api.LeaseRequest{Worker: "test", Step: 1}, http.StatusOK, &plain)
	if len(plain.Leases) == 0 {
		t.Fatal("no branch to lease after the interval")
	}
	var ids []string
	for _, g := range plain.Leases {
		ids = append(ids, g.ID)
	}
	e.post("/api/v1/runs/r1/leases/release", api.LeasesRequest{Worker: "test", Leases: ids}, http.StatusOK, nil)
	body, _ := json.Marshal(api.LeaseRequest{Worker: "test", Step: 1})
	hr, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/runs/r1/leases", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json;q=0.5, "+api.FrameType)
	resp, err := testClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != api.FrameType {
		t.Fatalf("lease asked for as a frame: %d %s %q", resp.StatusCode, data, ct)
	}
	framed, err := api.ReadLeaseFrame(data, json.Unmarshal)
	if err != nil || len(framed.Leases) != len(plain.Leases) {
		t.Fatalf("lease frame: %+v, %v; want %d grants", framed, err, len(plain.Leases))
	}
	for _, g := range framed.Leases {
		if !reflect.DeepEqual(g.History, turns) {
			t.Errorf("node %d's history in the frame: %+v, want the path submitted", g.Node, g.History)
		}
	}

	before = e.fileSum()
	bad := frame[:len(frame)-1]
	if st, _, out := e.callCT(http.MethodPost, "/api/v1/runs/r1/submit", api.FrameType, bad); st != http.StatusBadRequest ||
		!strings.Contains(string(out), "observation_tokens") {
		t.Errorf("a frame cut short: %d %s", st, out)
	}
	if st, _, out := e.callCT(http.MethodPost, "/api/v1/runs/r1/leases", api.FrameType, frame); st != http.StatusUnsupportedMediaType {
		t.Errorf("a frame to the leases endpoint: %d %s", st, out)
	}
	if e.fileSum() != before {
		t.Error("a refused frame changed the file")
	}
}
