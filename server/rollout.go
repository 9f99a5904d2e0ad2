package server

import (
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

func (s *server) openStep(w http.ResponseWriter, r *http.Request) error {
	var req OpenStepRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if len(req.Tasks) == 0 {
		return badRequest("tasks is empty: a step needs at least one task")
	}
	run := c.Run()
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

// MaxLeaseTTL bounds a lease's TTL: a worker silent for longer is dead.
const MaxLeaseTTL = 24 * time.Hour

func (s *server) lease(w http.ResponseWriter, r *http.Request) error {
	var req LeaseRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return withStatus(http.StatusForbidden, "read_only", errors.New("server: this server is read-only: it hands out no leases"))
	}
	// Range-checked before the conversion: 2^63-1 ms overflowed into a
	// negative duration, which passed and meant the default TTL.
	if req.TTLMs < 0 || req.TTLMs > MaxLeaseTTL.Milliseconds() {
		return badRequest("ttl_ms %d: want 0 (the default) up to %d", req.TTLMs, MaxLeaseTTL.Milliseconds())
	}
	ttl := time.Duration(req.TTLMs) * time.Millisecond
	run := c.Run()
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

func (s *server) submitWork(w http.ResponseWriter, r *http.Request) error {
	var req SubmitRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
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
	return s.write(w, r, c.Run(), &req, func(tx *store.Tx) (int, any, error) {
		out, err := c.Submit(tx, subs)
		return http.StatusOK, out, err
	})
}

func (s *server) abandonStep(w http.ResponseWriter, r *http.Request) error {
	var req AbandonRequest
	c, step, err := s.rolloutRequest(w, r, "step", &req)
	if err != nil {
		return err
	}
	run := c.Run()
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

func (s *server) stepStatus(w http.ResponseWriter, r *http.Request) error {
	c, step, err := s.rolloutRequest(w, r, "step", nil)
	if err != nil {
		return err
	}
	run := c.Run()
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
