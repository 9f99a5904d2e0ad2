package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/internal/vocab"
)

// Every reply of the API is valid against its object in the vocabulary's
// schema (docs/json-schema.json): no field the schema lacks, none it
// requires missing, each of its type.
func TestRepliesMatchSchema(t *testing.T) {
	v, err := vocab.Load("../docs/json-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{})
	check := func(what, def string, b []byte) {
		t.Helper()
		if err := v.Validate(def, b); err != nil {
			t.Errorf("%s against %s: %v\n%s", what, def, err, b)
		}
	}
	// list checks each member of the reply's array under key.
	list := func(path, key, def string) {
		t.Helper()
		code, _, b := e.call(http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		var m map[string][]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if len(m[key]) == 0 {
			t.Errorf("GET %s: no %s to check", path, key)
		}
		for i, x := range m[key] {
			check(fmt.Sprintf("GET %s %s[%d]", path, key, i), def, x)
		}
	}
	get := func(path, def string) {
		t.Helper()
		code, _, b := e.call(http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		check("GET "+path, def, b)
	}

	check("POST /runs", "CreateRunResult", e.post("/api/v1/runs", `{"client_key":"c","id":"r1","tree":`+testTree+`,"meta":{"who":"test"}}`, http.StatusCreated, nil))
	gid, roots, _ := grow(e, "r1", 1)
	check("POST close", "CloseGroupResult", e.post(fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), `{"client_key":"close"}`, 200, nil))
	check("POST checkpoints", "CheckpointResult", e.post("/api/v1/runs/r1/checkpoints", `{"client_key":"ck","step":1,"inline":"AQID"}`, 201, nil))
	check("POST steps", "OpenStepResult", e.post("/api/v1/runs/r1/steps", `{"client_key":"o2","step":2,"tasks":[{"id":"t2"}]}`, 200, nil))
	leases := e.post("/api/v1/runs/r1/leases", `{"worker":"w","step":2}`, 200, nil)
	check("POST leases", "LeaseResponse", leases)

	get("/api/v1/health", "Health")
	get("/api/v1/stats", "Stats")
	list("/api/v1/runs", "runs", "RunSummary")
	get("/api/v1/runs/r1", "RunSummary")
	list("/api/v1/runs/r1/steps", "steps", "StepMetrics")
	list("/api/v1/runs/r1/groups", "groups", "Group")
	get(fmt.Sprintf("/api/v1/runs/r1/groups/%d", gid), "GroupTree")
	get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d", roots[0]), "NodeInfo")
	get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/trajectory", roots[0]), "Trajectory")
	list("/api/v1/runs/r1/frontier", "nodes", "Node")
	list("/api/v1/runs/r1/advantages", "advantages", "Advantage")
	get("/api/v1/runs/r1/events", "EventPage")
	get("/api/v1/runs/r1/steps/2/status", "StepStatus")
	get("/api/v1/runs/r1/env-steps", "EnvSteps")
	get(fmt.Sprintf("/api/v1/runs/r1/groups/%d/view", gid), "GroupView")
	get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/view", roots[0]), "TrajectoryView")
	get("/api/v1/runs/r1/rubrics/page?pool=candidate,public,retired,merged", "RubricPage")
}
