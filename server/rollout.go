package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// The rollout protocol over HTTP. Every rule is tree.Coordinator's: these
// handlers decode a request, call the run's coordinator and encode its
// answer; its refusals map to 409 (tree.ErrConflict) or 400
// (model.ErrInvalid) in classify. A driver opens a step, any number of
// workers lease branches and submit their turns and scores (routing
// happens inside the submit that completes a group's interval), and the
// driver closes each group once the step status lists it as done.

func (s *server) openStep(w http.ResponseWriter, r *http.Request) error {
	var req api.OpenStepRequest
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
		return fmt.Errorf("%w: run %q: %s (recorded → asked): open the step with the run's config", rollout.ErrConfigMismatch, run, strings.Join(diff, ", "))
	}
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		groups, err := c.OpenStep(tx, req.Step, req.Tasks)
		return http.StatusOK, api.OpenStepResponse{Step: req.Step, Groups: groups}, err
	})
}

func (s *server) lease(w http.ResponseWriter, r *http.Request) error {
	var req api.LeaseRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return withStatus(http.StatusForbidden, "read_only", errors.New("server: this server is read-only: it hands out no leases"))
	}
	// Range-checked before the conversion: 2^63-1 ms overflowed into a
	// negative duration, which passed and meant the default TTL.
	if req.TTLMs < 0 || req.TTLMs > tree.MaxLeaseTTL.Milliseconds() {
		return badRequest("ttl_ms %d: want 0 (the default) up to %d", req.TTLMs, tree.MaxLeaseTTL.Milliseconds())
	}
	if len(req.Have) > api.MaxHave {
		return badRequest("have lists %d paths, want at most %d", len(req.Have), api.MaxHave)
	}
	// Before the grant: a lease granted to an answer that is then refused
	// stays held, its branches idle, until its TTL runs out.
	if _, err := packedTokens(r); err != nil {
		return err
	}
	have := make(map[uint64]int, len(req.Have))
	prefer := make([]uint64, 0, len(req.Have))
	for _, h := range req.Have {
		have[h.Node] = h.PathLen
		prefer = append(prefer, h.Node)
	}
	if err := s.expireOverdue(c); err != nil {
		return err
	}
	run := c.Run()
	out := api.LeaseResponse{Leases: []api.LeaseGrant{}}
	lr := tree.LeaseRequest{Worker: req.Worker, Max: req.Max, Step: req.Step, TTL: time.Duration(req.TTLMs) * time.Millisecond,
		PolicyVersion: req.PolicyVersion, Prefer: prefer}
	_, err = c.Lease(lr, func(tx *store.Tx, leases []rollout.Lease) error {
		rt, err := tx.Run(run)
		if err != nil {
			return err
		}
		for _, l := range leases {
			g := api.LeaseGrant{Lease: l}
			if req.History == nil || *req.History {
				if g.History, g.HistoryOf, g.HistoryFrom, err = historyPast(rt, l, have); err != nil {
					return err
				}
			}
			out.Leases = append(out.Leases, g)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.okTurns(w, r, out)
}

// historyPast is the path of l's branch, less what the worker holds: when
// it holds the branch's own path (a survivor) or its parent's up to the
// fork (a new child), only the turns past it, with the node whose path
// supplies the rest and how many turns that is.
func historyPast(rt *store.RunTx, l rollout.Lease, have map[uint64]int) (turns []model.Turn, of uint64, from int, err error) {
	if n, ok := have[l.Node]; ok && n == l.PathLen {
		return nil, l.Node, n, nil
	}
	if len(have) > 0 {
		node, err := rt.Node(l.Node)
		if err != nil {
			return nil, 0, 0, err
		}
		if n, ok := have[node.Parent]; ok && node.Parent != 0 && n >= node.Base {
			own, err := rt.Turns(l.Node)
			return own, node.Parent, node.Base, err
		}
	}
	turns, err = history(rt, l.Node)
	return turns, 0, 0, err
}

// history is the turns of node's path, root first.
func history(rt *store.RunTx, node uint64) ([]model.Turn, error) {
	path, err := rt.Trajectory(node)
	if err != nil {
		return nil, err
	}
	out := make([]model.Turn, len(path))
	for i := range path {
		out[i] = path[i].Turn
	}
	return out, nil
}

// renewLeases is a worker's heartbeat; releaseLeases gives leases back.
// Neither writes to the file: leases live in the coordinator's memory.
func (s *server) renewLeases(w http.ResponseWriter, r *http.Request) error {
	return s.leases(w, r, (*tree.Coordinator).Renew)
}

func (s *server) releaseLeases(w http.ResponseWriter, r *http.Request) error {
	return s.leases(w, r, (*tree.Coordinator).Release)
}

func (s *server) leases(w http.ResponseWriter, r *http.Request, fn func(*tree.Coordinator, string, []string) []rollout.LeaseState) error {
	var req api.LeasesRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if req.Worker == "" {
		return badRequest("worker is required: leases are bound to the worker that took them")
	}
	return s.ok(w, api.LeasesResponse{Leases: fn(c, req.Worker, req.Leases)})
}

// expireOverdue records as failed what waited past the run's pending
// timeout (tree.Coordinator.Expire), when anything did. Requests that
// poll a step — status, pending work, leases — run it, so a reward that
// never comes is failed by the next poll after its deadline. It writes
// directly, outside the write batch: it answers no client key.
func (s *server) expireOverdue(c *tree.Coordinator) error {
	if s.opts.ReadOnly || !c.Overdue() {
		return nil
	}
	return s.db.Update(func(tx *store.Tx) error {
		_, err := c.Expire(tx)
		return err
	})
}

func (s *server) submitWork(w http.ResponseWriter, r *http.Request) error {
	var req api.SubmitRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if len(req.Submissions) == 0 {
		return badRequest("submissions is empty")
	}
	// Encoding (and the store's checks of every turn) happens here, outside
	// the write batch that every other writer waits for.
	subs := make([]rollout.Submission, len(req.Submissions))
	copy(subs, req.Submissions)
	enc, err := tree.EncodeSubmissions(subs)
	if err != nil {
		return err
	}
	return s.write(w, r, c.Run(), &req, func(tx *store.Tx) (int, any, error) {
		out, err := c.SubmitEncoded(tx, subs, enc)
		return http.StatusOK, out, err
	})
}

func (s *server) abandonStep(w http.ResponseWriter, r *http.Request) error {
	var req api.AbandonRequest
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
		return http.StatusOK, api.OpenStepResponse{Step: step, Groups: groups}, err
	})
}

func (s *server) stepStatus(w http.ResponseWriter, r *http.Request) error {
	c, step, err := s.rolloutRequest(w, r, "step", nil)
	if err != nil {
		return err
	}
	if err := s.expireOverdue(c); err != nil {
		return err
	}
	run := c.Run()
	var out rollout.StepStatus
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

func (s *server) publishVersion(w http.ResponseWriter, r *http.Request) error {
	var req api.PublishRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	run := c.Run()
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		if err := c.Publish(tx, req.Version); err != nil {
			return 0, nil, err
		}
		rt, err := tx.Run(run)
		if err != nil {
			return 0, nil, err
		}
		info, err := rt.Info()
		return http.StatusOK, api.CreateRunResponse{Run: runJSON(info)}, err
	})
}

func (s *server) submitRewards(w http.ResponseWriter, r *http.Request) error {
	var req api.RewardsRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if len(req.Rewards) == 0 {
		return badRequest("rewards is empty")
	}
	return s.write(w, r, c.Run(), &req, func(tx *store.Tx) (int, any, error) {
		out, err := c.SubmitRewards(tx, req.Rewards)
		return http.StatusOK, out, err
	})
}

func (s *server) submitScores(w http.ResponseWriter, r *http.Request) error {
	var req api.ScoresRequest
	c, _, err := s.rolloutRequest(w, r, "", &req)
	if err != nil {
		return err
	}
	if len(req.Scores) == 0 {
		return badRequest("scores is empty")
	}
	return s.write(w, r, c.Run(), &req, func(tx *store.Tx) (int, any, error) {
		out, err := c.SubmitScores(tx, req.Scores)
		return http.StatusOK, out, err
	})
}

func (s *server) pending(w http.ResponseWriter, r *http.Request) error {
	c, step, err := s.rolloutRequest(w, r, "step", nil)
	if err != nil {
		return err
	}
	withHistory := r.URL.Query().Get("history")
	if withHistory != "" && withHistory != "0" && withHistory != "1" {
		return badRequest("history=%q: want 0 or 1", withHistory)
	}
	if err := s.expireOverdue(c); err != nil {
		return err
	}
	run := c.Run()
	out := api.PendingResponse{Step: step, Scores: []api.PendingItem{}, Rewards: []api.PendingItem{}}
	err = s.db.View(func(tx *store.Tx) error {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return err
		}
		p, err := c.Pending(tx, step)
		if err != nil {
			return err
		}
		items := func(ws []rollout.PendingWork) ([]api.PendingItem, error) {
			out := make([]api.PendingItem, len(ws))
			for i, pw := range ws {
				out[i].PendingWork = pw
				if withHistory == "1" {
					if out[i].History, err = history(rt, pw.Node); err != nil {
						return nil, err
					}
				}
			}
			return out, nil
		}
		if out.Scores, err = items(p.Scores); err != nil {
			return err
		}
		out.Rewards, err = items(p.Rewards)
		return err
	})
	if err != nil {
		return err
	}
	return s.okTurns(w, r, out)
}
