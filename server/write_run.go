package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
)

func (s *server) createRun(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateRunRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if !store.ValidRunID(req.ID) {
		return badRequest("id %q: a run id is %s", req.ID, store.RunIDRule)
	}
	cfg := runconfig.Default()
	if err := overlay(req.Tree, &cfg.Tree, "tree"); err != nil {
		return err
	}
	if err := overlay(req.Rubric, cfg.Rubric, "rubric"); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return badRequest("%v", err)
	}
	raw := cfg.JSON()
	return s.write(w, r, req.ID, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := tx.CreateRun(req.ID, raw, req.Meta)
		if err != nil {
			return 0, nil, err
		}
		info, err := rt.Info()
		return http.StatusCreated, api.CreateRunResponse{Run: runJSON(info)}, err
	})
}

// overlay decodes a config member strictly over defaults.
func overlay(raw json.RawMessage, into any, name string) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return badRequest("%s: %s", name, strings.TrimPrefix(jsonError(err).Error(), api.ErrBadRequest.Error()+": "))
	}
	return nil
}

func (s *server) setRunStatus(w http.ResponseWriter, r *http.Request) error {
	var req api.RunStatusRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	switch req.Status {
	case model.RunRunning, model.RunFinished, model.RunFailed:
	default:
		return badRequest("status %q: want running, finished or failed", req.Status)
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		if err := rt.SetRunStatus(req.Status); err != nil {
			return 0, nil, err
		}
		info, err := rt.Info()
		return http.StatusOK, api.CreateRunResponse{Run: runJSON(info)}, err
	})
}

func (s *server) putCheckpoint(w http.ResponseWriter, r *http.Request) error {
	var req api.CheckpointRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.Step == 0 {
		return badRequest("step is required (steps start at 1)")
	}
	if len(req.Inline) == 0 && req.URI == "" {
		return badRequest("a checkpoint needs inline state or a uri")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		if err := rt.PutCheckpoint(model.Checkpoint{Step: req.Step, Inline: req.Inline, URI: req.URI, Hash: req.Hash, Meta: req.Meta}); err != nil {
			return 0, nil, err
		}
		var out api.CheckpointResponse
		if out.Checkpoint, err = rt.Checkpoint(req.Step); err != nil {
			return 0, nil, err
		}
		info, err := rt.Info()
		out.Run = runJSON(info)
		return http.StatusCreated, out, err
	})
}
