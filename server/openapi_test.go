package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store/storetest"
)

// The OpenAPI document and the handler's routes agree both ways: every
// registered endpoint is documented (method and path), every documented
// one is registered, and every path parameter is declared.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	h, err := NewHandler(storetest.Open(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var registered []string
	for _, p := range h.(*server).ops.patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			continue // the catch-all JSON 404 of /api/
		}
		registered = append(registered, method+" "+strings.TrimSuffix(path, "{$}"))
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v, version %q", err, doc.OpenAPI)
	}
	var documented []string
	ids := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s %s: operationId %q missing or repeated", method, path, op.OperationID)
			}
			ids[op.OperationID] = true
			declared := map[string]bool{}
			for _, p := range op.Parameters {
				if p.In == "path" {
					declared[p.Name] = true
				}
			}
			for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					t.Errorf("%s %s: path parameter %s not declared", method, path, m[1])
				}
				delete(declared, m[1])
			}
			for name := range declared {
				t.Errorf("%s %s: declares path parameter %s it does not have", method, path, name)
			}
		}
	}
	sort.Strings(registered)
	sort.Strings(documented)
	if strings.Join(registered, "\n") != strings.Join(documented, "\n") {
		t.Errorf("routes and openapi.json differ:\nregistered:\n  %s\ndocumented:\n  %s",
			strings.Join(registered, "\n  "), strings.Join(documented, "\n  "))
	}
	if len(registered) < 30 {
		t.Errorf("only %d routes registered", len(registered))
	}
}

// GET /api/v1/ is the index: the API version, where the OpenAPI document
// and the metrics are, every endpoint; /api/v1/openapi.json is the
// document itself; both are behind the token like the rest of the API.
func TestAPIIndex(t *testing.T) {
	e := newEnv(t, Options{Token: "0123456789abcdef0123"})
	var ix api.Index
	e.get("/api/v1/", &ix)
	major, _, _ := strings.Cut(ix.APIVersion, ".")
	if ix.API != APIVersion || "v"+major != APIVersion || ix.OpenAPI != "/api/v1/openapi.json" || ix.Metrics != "/metrics" {
		t.Errorf("index: %+v", ix)
	}
	found := false
	for _, ep := range ix.Endpoints {
		if ep.Method == "GET" && ep.Path == "/api/v1/runs/{run}/nodes/{node}/trajectory" && ep.Summary != "" {
			found = true
		}
	}
	if !found || len(ix.Endpoints) != len(e.srvPatterns()) {
		t.Errorf("index lists %d endpoints (trajectory found: %v), the handler %d", len(ix.Endpoints), found, len(e.srvPatterns()))
	}
	st, hdr, body := e.call(http.MethodGet, "/api/v1/openapi.json", nil)
	if st != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || string(body) != string(openAPIDoc) {
		t.Errorf("openapi.json: %d %s, %d bytes", st, hdr.Get("Content-Type"), len(body))
	}
	// The 404 that points here.
	st, _, body = e.call(http.MethodGet, "/api/v1/nope", nil)
	if st != 404 || !strings.Contains(string(body), "/api/v1/") {
		t.Errorf("unknown endpoint: %d %s", st, body)
	}
	e.c.Token = ""
	if st, _, _ := e.call(http.MethodGet, "/api/v1/", nil); st != http.StatusUnauthorized {
		t.Errorf("index without the token: %d", st)
	}
}

// srvPatterns are the handler's documented-kind routes (method and path).
func (e *testEnv) srvPatterns() []string {
	var out []string
	for _, p := range e.srv.Config.Handler.(*server).ops.patterns {
		if strings.Contains(p, " ") {
			out = append(out, p)
		}
	}
	return out
}
