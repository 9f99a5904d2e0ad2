package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// The rollout protocol over HTTP. Every rule is tree.Coordinator's: these
// handlers decode a request, call the run's coordinator and encode its
// answer; its refusals map to 409 (tree.ErrConflict) or 400
// (store.ErrInvalid) in classify. A driver opens a step, any number of
// workers lease branches and submit their turns and scores (routing
// happens inside the submit that completes a group's interval), and the
// driver closes each group once the step status lists it as done.

// OpenStepRequest is POST /api/v1/runs/{run}/steps: one group per task, each
// with the run's B0 root branches. Asking again with the same tasks returns
// the same groups; other tasks for an opened step are a 409. Tree, when
// given, names the tree config fields the driver relies on (e.g. {"k": 5});
// a run that recorded other values refuses the step with a 409 naming them
// (config_mismatch), instead of growing trees the driver does not expect.
type OpenStepRequest struct {
	Keyed
	Step  uint64          `json:"step"`
	Tasks []tree.Task     `json:"tasks"`
	Tree  json.RawMessage `json:"tree,omitempty"`
}

// OpenStepResponse answers POST .../steps: the step's groups in task order.
type OpenStepResponse struct {
	Step   uint64        `json:"step"`
	Groups []store.Group `json:"groups"`
}

func (s *server) openStep(w http.ResponseWriter, r *http.Request) error {
	var req OpenStepRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Tasks) == 0 {
		return badRequest("tasks is empty: a step needs at least one task")
	}
	run := r.PathValue("run")
	c, err := s.coordinator(run)
	if err != nil {
		return err
	}
	want := c.Config()
	if err := overlay(req.Tree, &want, "tree"); err != nil {
		return err
	}
	if diff := tree.ConfigDiff(c.Config(), want); len(diff) > 0 {
		return fmt.Errorf("%w: run %q: %s (recorded → asked): open the step with the run's config", tree.ErrConfigMismatch, run, strings.Join(diff, ", "))
	}
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		groups, err := c.OpenStep(tx, req.Step, req.Tasks)
		return http.StatusOK, OpenStepResponse{Step: req.Step, Groups: groups}, err
	})
}

// LeaseRequest is POST /api/v1/runs/{run}/leases: up to Max branches (0:
// every branch free) of Step (0: any open step) for Worker, held for TTLMs
// milliseconds (0: the server's default of ten minutes). History (default
// true) attaches each branch's full path, so a worker that keeps no state
// can restore its environment and prompt its policy. A lease writes
// nothing, so it carries no client key; asking again hands out other
// branches, never the ones still held.
type LeaseRequest struct {
	Worker  string `json:"worker"`
	Max     int    `json:"max"`
	Step    uint64 `json:"step"`
	TTLMs   int64  `json:"ttl_ms"`
	History *bool  `json:"history,omitempty"`
}

// MaxLeaseTTL bounds a lease's TTL: a worker silent for longer is dead.
const MaxLeaseTTL = 24 * time.Hour

// LeaseGrant is one leased branch: the lease and, when asked for, the
// turns of its path so far (root first, inherited prefix included).
type LeaseGrant struct {
	tree.Lease
	History []store.Turn `json:"history,omitempty"`
}

// LeaseResponse answers POST .../leases; an empty list means nothing is
// free right now (see the step status for why).
type LeaseResponse struct {
	Leases []LeaseGrant `json:"leases"`
}

func (s *server) lease(w http.ResponseWriter, r *http.Request) error {
	var req LeaseRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return withStatus(http.StatusForbidden, "read_only", errors.New("server: this server is read-only: it hands out no leases"))
	}
	ttl := time.Duration(req.TTLMs) * time.Millisecond
	if req.TTLMs < 0 || ttl > MaxLeaseTTL {
		return badRequest("ttl_ms %d: want 0 (the default) up to %d", req.TTLMs, MaxLeaseTTL.Milliseconds())
	}
	run := r.PathValue("run")
	c, err := s.coordinator(run)
	if err != nil {
		return err
	}
	out := LeaseResponse{Leases: []LeaseGrant{}}
	_, err = c.Lease(tree.LeaseRequest{Worker: req.Worker, Max: req.Max, Step: req.Step, TTL: ttl}, func(tx *store.Tx, leases []tree.Lease) error {
		rt, err := tx.Run(run)
		if err != nil {
			return err
		}
		for _, l := range leases {
			g := LeaseGrant{Lease: l}
			if req.History == nil || *req.History {
				path, err := rt.Trajectory(l.Node)
				if err != nil {
					return err
				}
				g.History = make([]store.Turn, len(path))
				for i := range path {
					g.History[i] = path[i].Turn
				}
			}
			out.Leases = append(out.Leases, g)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// SubmitRequest is POST /api/v1/runs/{run}/submit: workers' turns, scores,
// rewards and failures, each under the lease it was done for, applied in
// one transaction. One refused submission refuses the request and nothing
// is written; the answer says which and why.
type SubmitRequest struct {
	Keyed
	Submissions []tree.Submission `json:"submissions"`
}

func (s *server) submitWork(w http.ResponseWriter, r *http.Request) error {
	var req SubmitRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Submissions) == 0 {
		return badRequest("submissions is empty")
	}
	// Encoding (and the store's checks of every turn) happens here, outside
	// the write batch that every other writer waits for.
	subs := make([]tree.Submission, len(req.Submissions))
	copy(subs, req.Submissions)
	if err := tree.EncodeSubmissions(subs); err != nil {
		return err
	}
	run := r.PathValue("run")
	c, err := s.coordinator(run)
	if err != nil {
		return err
	}
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		out, err := c.Submit(tx, subs)
		return http.StatusOK, out, err
	})
}

// AbandonRequest is POST /api/v1/runs/{run}/steps/{step}/abandon: give up
// the step's open groups, on record, so a checkpoint can complete it.
type AbandonRequest struct {
	Keyed
	Reason string `json:"reason"`
}

func (s *server) abandonStep(w http.ResponseWriter, r *http.Request) error {
	step, err := pathID(r, "step")
	if err != nil {
		return err
	}
	var req AbandonRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	run := r.PathValue("run")
	c, err := s.coordinator(run)
	if err != nil {
		return err
	}
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		if err := c.Abandon(tx, step, req.Reason); err != nil {
			return 0, nil, err
		}
		rt, err := tx.Run(run)
		if err != nil {
			return 0, nil, err
		}
		groups, err := rt.Groups(step)
		return http.StatusOK, OpenStepResponse{Step: step, Groups: groups}, err
	})
}

// StepStatus answers GET .../steps/{step}/status (tree.StepStatus).
type StepStatus = tree.StepStatus

func (s *server) stepStatus(w http.ResponseWriter, r *http.Request) error {
	step, err := pathID(r, "step")
	if err != nil {
		return err
	}
	run := r.PathValue("run")
	c, err := s.coordinator(run)
	if err != nil {
		return err
	}
	var out StepStatus
	err = s.db.View(func(tx *store.Tx) (err error) {
		if _, err = lookupRun(tx, run); err != nil {
			return err
		}
		out, err = c.Status(tx, step)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}
