package server

import (
	"github.com/patrdb/patrdb/model"
	"net/http"
	"slices"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/store"
)

// The trainer's own figures of each step (model.Scalars):
//
//	POST /api/v1/runs/{run}/scalars   ScalarsRequest → 201 ScalarsResponse
//	GET  /api/v1/runs/{run}/scalars?from=STEP         ScalarsPage

func (s *server) putScalars(w http.ResponseWriter, r *http.Request) error {
	var req api.ScalarsRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.Step == 0 {
		return badRequest("step is required (steps start at 1)")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		if err := rt.PutScalars(req.Step, req.Values); err != nil {
			return 0, nil, err
		}
		var out api.ScalarsResponse
		out.Scalars, err = rt.ScalarsAt(req.Step)
		return http.StatusCreated, out, err
	})
}

func (s *server) getScalars(w http.ResponseWriter, r *http.Request) error {
	from, err := queryUint(r, "from", 0)
	if err != nil {
		return err
	}
	out := api.ScalarsPage{Names: []string{}, Steps: []model.Scalars{}}
	err = s.viewParts(r, 0, func(rt *store.RunTx) error {
		names := map[string]bool{}
		return rt.ForEachScalars(from, func(sc model.Scalars) error {
			for n := range sc.Values {
				if !names[n] {
					names[n] = true
					out.Names = append(out.Names, n)
				}
			}
			out.Steps = append(out.Steps, sc)
			return nil
		})
	})
	if err != nil {
		return err
	}
	slices.Sort(out.Names)
	return s.ok(w, out)
}
