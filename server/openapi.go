package server

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/patrdb/patrdb/api"
)

// openAPIDoc is the API's OpenAPI document, kept beside the code that
// serves it; a test holds it to the routes the handler registers.
//
//go:embed openapi.json
var openAPIDoc []byte

// apiDoc is the part of openAPIDoc the index is built from.
type apiDoc struct {
	Info struct {
		Version string `json:"version"`
	} `json:"info"`
	Paths map[string]map[string]struct {
		Summary string `json:"summary"`
	} `json:"paths"`
}

// parsedDoc and apiIndex are parsed on first use, not at start-up: every
// patrdb command links this package, and parsing the document costs most
// of a millisecond.
var parsedDoc = sync.OnceValue(func() apiDoc {
	var d apiDoc
	if err := json.Unmarshal(openAPIDoc, &d); err != nil {
		panic("server: openapi.json does not parse: " + err.Error()) // a build defect, caught by the openapi tests
	}
	return d
})

// APISpecVersion is the API's version, "<major>.<minor>", from the
// OpenAPI document: the major number is the /api/v<major> prefix and
// changes only with a change clients must follow; the minor grows as
// endpoints are added. Clients compare it with the oldest they can use.
func APISpecVersion() string { return parsedDoc().Info.Version }

var apiIndex = sync.OnceValue(func() api.Index {
	ix := api.Index{API: APIVersion, APIVersion: APISpecVersion(), Server: moduleVersion(),
		OpenAPI: "/api/v1/openapi.json", Metrics: "/metrics", Endpoints: []api.Endpoint{}}
	for path, ops := range parsedDoc().Paths {
		for method, op := range ops {
			ix.Endpoints = append(ix.Endpoints, api.Endpoint{Method: strings.ToUpper(method), Path: path, Summary: op.Summary})
		}
	}
	sort.Slice(ix.Endpoints, func(i, j int) bool {
		a, b := ix.Endpoints[i], ix.Endpoints[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Method < b.Method
	})
	return ix
})

// moduleVersion is the version of the patrdb module in this binary
// ("(devel)" in a build from a work tree).
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	if bi.Main.Path == "github.com/patrdb/patrdb" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/patrdb/patrdb" {
			return d.Version
		}
	}
	return "unknown"
}

func (s *server) index(w http.ResponseWriter, _ *http.Request) error {
	return s.ok(w, apiIndex())
}

func (s *server) openAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPIDoc)
	return err
}
