package server

import (
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/store"
)

// The viewer's endpoints: each sends one figure set replay computes, so a
// page needs one request per panel and draws what it gets.
//
//	GET /api/v1/runs/{run}/env-steps               EnvSteps
//	GET /api/v1/runs/{run}/groups/{group}/view     view.GroupView
//	GET /api/v1/runs/{run}/nodes/{node}/view       view.TrajectoryView
//	GET /api/v1/runs/{run}/rubrics/page?pool=public,candidate&q=TEXT&sort=rho&offset=0&limit=50
//	                                               RubricPage
func (s *server) viewerRoutes(prefix string) {
	s.handleChecked("GET "+prefix+"/runs/{run}/env-steps", s.envSteps)
	s.handleChecked("GET "+prefix+"/runs/{run}/groups/{group}/view", s.viewGroup)
	s.handleChecked("GET "+prefix+"/runs/{run}/nodes/{node}/view", s.viewTrajectory)
	s.handleChecked("GET "+prefix+"/runs/{run}/rubrics/page", s.viewRubrics)
	s.handle("GET "+prefix+"/runs/{run}/search", s.searchRun)
	s.handleChecked("GET "+prefix+"/runs/{run}/branches", s.viewBranches)
}

// EnvSteps is GET /api/v1/runs/{run}/env-steps: the environment work of
// each step, for curves against env steps.
type EnvSteps struct {
	Steps []view.StepEnv `json:"steps"`
}

func (s *server) envSteps(w http.ResponseWriter, r *http.Request) error {
	var out EnvSteps
	err := s.viewParts(r, 0, func(rt *store.RunTx) error {
		var err error
		out.Steps, err = view.EnvSteps(rt)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) viewGroup(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "group")
	if err != nil {
		return err
	}
	var out *view.GroupView
	err = s.viewChecked(r, func(rt *store.RunTx) error {
		out, err = view.ViewGroup(rt, id)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

func (s *server) viewTrajectory(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "node")
	if err != nil {
		return err
	}
	var out *view.TrajectoryView
	err = s.viewChecked(r, func(rt *store.RunTx) error {
		out, err = view.ViewTrajectory(rt, id)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// RubricPage is GET /api/v1/runs/{run}/rubrics/page: a view.RubricPage
// whose rubrics carry their running correlation next to the admission rho.
type RubricPage struct {
	Total   int                      `json:"total"` // matches, over every page
	Offset  int                      `json:"offset"`
	Limit   int                      `json:"limit"`
	Pools   map[model.RubricPool]int `json:"pools"` // every pool's size, unfiltered
	Rubrics []rubricpool.RubricView  `json:"rubrics"`
}

func (s *server) viewRubrics(w http.ResponseWriter, r *http.Request) error {
	q := view.RubricQuery{Text: r.URL.Query().Get("q"), Sort: r.URL.Query().Get("sort")}
	if p := r.URL.Query().Get("pool"); p != "" {
		for _, name := range strings.Split(p, ",") {
			q.Pools = append(q.Pools, model.RubricPool(strings.TrimSpace(name)))
		}
	}
	off, err := queryUint(r, "offset", 0)
	if err != nil {
		return err
	}
	lim, err := queryUint(r, "limit", 0)
	if err != nil {
		return err
	}
	if off > math.MaxInt32 || lim > math.MaxInt32 {
		return badRequest("offset %d, limit %d: too large", off, lim)
	}
	q.Offset, q.Limit = int(off), int(lim)
	var out *view.RubricPage
	err = s.viewParts(r, 0, func(rt *store.RunTx) error {
		out, err = view.Rubrics(rt, q)
		return err
	})
	if errors.Is(err, view.ErrViewQuery) {
		return withStatus(http.StatusBadRequest, "invalid", err)
	}
	if err != nil {
		return err
	}
	reply := RubricPage{Total: out.Total, Offset: out.Offset, Limit: out.Limit, Pools: out.Pools, Rubrics: make([]rubricpool.RubricView, len(out.Rubrics))}
	for i, rb := range out.Rubrics {
		reply.Rubrics[i] = rubricpool.ViewRubric(rb)
	}
	return s.ok(w, reply)
}
