package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
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
	doc, err := vocab.Load("openapi.json")
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
	// documented checks a request body (if any) and the reply against what
	// openapi.json says the route takes and answers with that status.
	documented := func(method, path string, status int, body string, reply []byte) {
		t.Helper()
		op := "/paths/" + pointerEscape(routeOf(t, path)) + "/" + strings.ToLower(method)
		if body != "" {
			if err := doc.ValidateAt(op+"/requestBody/content/application~1json/schema", []byte(body)); err != nil {
				t.Errorf("%s %s: the request against openapi.json: %v\n%s", method, path, err, body)
			}
		}
		if err := doc.ValidateAt(fmt.Sprintf("%s/responses/%d/content/application~1json/schema", op, status), reply); err != nil {
			t.Errorf("%s %s %d: the reply against openapi.json: %v\n%s", method, path, status, err, reply)
		}
	}
	post := func(path, body string, status int, def string) []byte {
		t.Helper()
		b := e.post(path, body, status, nil)
		check("POST "+path, def, b)
		documented(http.MethodPost, path, status, body, b)
		return b
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
		documented(http.MethodGet, path, code, "", b)
	}
	get := func(path, def string) {
		t.Helper()
		code, _, b := e.call(http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		check("GET "+path, def, b)
		documented(http.MethodGet, path, code, "", b)
	}

	post("/api/v1/runs", `{"client_key":"c","id":"r1","tree":`+testTree+`,"meta":{"who":"test"}}`, http.StatusCreated, "CreateRunResult")
	gid, roots, _ := grow(e, "r1", 1)
	post(fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), `{"client_key":"close"}`, 200, "CloseGroupResult")
	post("/api/v1/runs/r1/checkpoints", `{"client_key":"ck","step":1,"inline":"AQID"}`, 201, "CheckpointResult")
	post("/api/v1/runs/r1/status", `{"client_key":"st","status":"running"}`, 200, "CreateRunResult")
	post("/api/v1/runs/r1/steps", `{"client_key":"o2","step":2,"tasks":[{"id":"t2"}]}`, 200, "OpenStepResult")
	post("/api/v1/runs/r1/leases", `{"worker":"w","step":2}`, 200, "LeaseResponse")

	get("/api/v1/health", "Health")
	get("/api/v1/stats", "Stats")
	list("/api/v1/runs", "runs", "RunSummary")
	get("/api/v1/runs/r1", "RunSummary")
	list("/api/v1/runs/r1/steps", "steps", "StepMetrics")
	get("/api/v1/runs/r1/stats", "ReplayRunStats")
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
	post("/api/v1/runs/r1/steps/2/abandon", `{"client_key":"ab","reason":"test"}`, 200, "OpenStepResult")
}

// routeOf is the documented route (openapi.json's path template) that a
// request path falls under.
func routeOf(t *testing.T, path string) string {
	t.Helper()
	path, _, _ = strings.Cut(path, "?")
	var doc struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	for tmpl := range doc.Paths {
		re := "^" + regexp.MustCompile(`\\\{\w+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		if regexp.MustCompile(re).MatchString(path) {
			return tmpl
		}
	}
	t.Fatalf("%s is under no route of openapi.json", path)
	return ""
}

// pointerEscape escapes a JSON pointer's reference token.
func pointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
