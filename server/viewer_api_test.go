package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/rubricpool"
)

func TestViewerEndpoints(t *testing.T) {
	e := newEnv(t, Options{})
	buildViewerRun(t, e.db, "v", viewerSpec{steps: 3, tasks: 2, roots: 3, nodes: 10, children: 2, tokens: 5, obsLines: 2, rubrics: 4, seed: 8})
	var es EnvSteps
	e.get("/api/v1/runs/v/env-steps", &es)
	if len(es.Steps) != 3 || es.Steps[2].EnvStepsTotal == 0 || es.Steps[2].Groups != 2 {
		t.Fatalf("env steps %+v", es)
	}
	var gv view.GroupView
	e.get("/api/v1/runs/v/groups/2/view", &gv)
	if gv.Group.ID != 2 || len(gv.Nodes) == 0 || gv.Summary.Nodes != len(gv.Nodes) {
		t.Fatalf("group view %+v", gv.Summary)
	}
	var tv view.TrajectoryView
	e.get(fmt.Sprintf("/api/v1/runs/v/nodes/%d/view", gv.Nodes[len(gv.Nodes)-1].ID), &tv)
	if tv.Group.ID != 2 || len(tv.Turns) == 0 || tv.Turns[0].MeanLogprob == nil {
		t.Fatalf("trajectory view %+v", tv)
	}
	var page RubricPage
	e.get("/api/v1/runs/v/rubrics/page?pool=retired&limit=2", &page)
	if page.Limit != 2 || page.Total != page.Pools[model.PoolRetired] || len(page.Rubrics) != min(2, page.Total) {
		t.Fatalf("rubric page %+v", page)
	}
	// Public rubrics with activations carry their running correlation.
	e.get("/api/v1/runs/v/rubrics/page?pool=public", &page)
	for _, rb := range page.Rubrics {
		want, ok := rubricpool.Rho(rb.Usage)
		if !ok || rb.RunningCorr == nil || *rb.RunningCorr != want {
			t.Errorf("rubric %d: running_corr %v, want %v (defined %v)", rb.ID, rb.RunningCorr, want, ok)
		}
	}
	if len(page.Rubrics) == 0 {
		t.Error("no public rubric to check")
	}
	for path, want := range map[string]int{
		"/api/v1/runs/v/rubrics/page?pool=everything": http.StatusBadRequest,
		"/api/v1/runs/v/rubrics/page?sort=color":      http.StatusBadRequest,
		"/api/v1/runs/v/rubrics/page?limit=100000":    http.StatusBadRequest,
		"/api/v1/runs/v/rubrics/page?offset=-1":       http.StatusBadRequest,
		"/api/v1/runs/v/nodes/0/view":                 http.StatusBadRequest,
		"/api/v1/runs/v/nodes/99999/view":             http.StatusNotFound,
		"/api/v1/runs/v/groups/99999/view":            http.StatusNotFound,
		"/api/v1/runs/nope/env-steps":                 http.StatusNotFound,
	} {
		st, _, body := e.call(http.MethodGet, path, nil)
		var msg struct{ Error string }
		if st != want || json.Unmarshal(body, &msg) != nil || msg.Error == "" {
			t.Errorf("GET %s: %d %s, want %d with a JSON error", path, st, body, want)
		}
	}
}
