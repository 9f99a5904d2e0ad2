package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/view"
	"github.com/patrdb/patrdb/store"
)

// The viewer's search and its side-by-side branches:
//
//	GET /api/v1/runs/{run}/search?text=&status=completed,pruned&leaves=1&min_reward=&max_reward=
//	    &min_score=&max_score=&min_advantage=&max_advantage=&policy_version=&failed=1&retried=1&step=&limit=
//	                                                  view.SearchResult
//	GET /api/v1/runs/{run}/branches?nodes=12,15        view.BranchesView
//
// The search reads what it scans of the whole run (its turns for a text),
// so a run this server has not checked is checked whole first.

func (s *server) searchRun(w http.ResponseWriter, r *http.Request) error {
	q, err := nodeQuery(r)
	if err != nil {
		return err
	}
	var out *view.SearchResult
	err = s.viewRun(r, func(rt *store.RunTx) error {
		out, err = view.Search(rt, q)
		return err
	})
	return s.viewReply(w, out, err)
}

// viewReply sends a view, or a view query replay refused as a 400.
func (s *server) viewReply(w http.ResponseWriter, v any, err error) error {
	if errors.Is(err, view.ErrViewQuery) {
		return withStatus(http.StatusBadRequest, "invalid", err)
	}
	if err != nil {
		return err
	}
	return s.ok(w, v)
}

// nodeQuery reads a search's query string.
func nodeQuery(r *http.Request) (view.NodeQuery, error) {
	v := r.URL.Query()
	q := view.NodeQuery{Text: v.Get("text")}
	if len(q.Text) > 1024 {
		return q, badRequest("text: %d bytes, at most 1024", len(q.Text))
	}
	for _, st := range strings.Split(v.Get("status"), ",") {
		if st = strings.TrimSpace(st); st != "" {
			q.Statuses = append(q.Statuses, model.NodeStatus(st))
		}
	}
	var err error
	for _, f := range []struct {
		name string
		dst  **float64
	}{{"min_reward", &q.MinReward}, {"max_reward", &q.MaxReward}, {"min_score", &q.MinScore}, {"max_score", &q.MaxScore},
		{"min_advantage", &q.MinAdvantage}, {"max_advantage", &q.MaxAdvantage}} {
		if s := v.Get(f.name); s != "" {
			x, perr := strconv.ParseFloat(s, 64)
			if perr != nil {
				return q, badRequest("%s=%q is not a number", f.name, s)
			}
			*f.dst = &x
		}
	}
	if q.Step, err = queryUint(r, "step", 0); err != nil {
		return q, err
	}
	if q.PolicyVersion, err = queryUint(r, "policy_version", 0); err != nil {
		return q, err
	}
	limit, err := queryUint(r, "limit", 0)
	if err != nil {
		return q, err
	}
	q.Limit = int(min(limit, view.MaxSearchLimit))
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"leaves", &q.LeavesOnly}, {"failed", &q.Failed}, {"retried", &q.Retried}} {
		if *b.dst, err = queryBool(r, b.name); err != nil {
			return q, err
		}
	}
	return q, nil
}

func (s *server) viewBranches(w http.ResponseWriter, r *http.Request) error {
	var ids []uint64
	for _, f := range strings.Split(r.URL.Query().Get("nodes"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		id, err := strconv.ParseUint(f, 10, 64)
		if err != nil || id == 0 {
			return badRequest("nodes: %q is not a node id", f)
		}
		ids = append(ids, id)
		if len(ids) > view.MaxBranches {
			return badRequest("nodes: more than %d", view.MaxBranches)
		}
	}
	var out *view.BranchesView
	err := s.viewChecked(r, func(rt *store.RunTx) error {
		var err error
		out, err = view.ViewBranches(rt, ids)
		return err
	})
	return s.viewReply(w, out, err)
}
