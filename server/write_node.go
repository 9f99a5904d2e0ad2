package server

import (
	"net/http"

	"github.com/patrdb/patrdb/store"
)

// AppendTurnsRequest is POST /api/v1/runs/{run}/nodes/{node}/turns: turns at
// the node's own-turn indexes From, From+1, ... From is required and may be
// at most the node's turn count, so a resent batch overwrites the same turn
// keys instead of adding a copy. EnvState, when given, replaces the node's
// opaque environment-state reference in the same transaction.
type AppendTurnsRequest struct {
	Keyed
	From     *int         `json:"from"`
	Turns    []store.Turn `json:"turns"`
	EnvState []byte       `json:"env_state,omitempty"`
}

// AppendTurnsResponse answers POST .../turns: the node's turn count after
// the write.
type AppendTurnsResponse struct {
	Node  uint64 `json:"node"`
	From  int    `json:"from"`
	Count int    `json:"count"`
	Turns int    `json:"turns"`
}

func (s *server) appendTurns(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "node")
	if err != nil {
		return err
	}
	var req AppendTurnsRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.From == nil {
		return badRequest("from is required: the own-turn index of the first turn (the node's turn count to append)")
	}
	if *req.From < 0 {
		return badRequest("from %d is negative", *req.From)
	}
	if len(req.Turns) == 0 {
		return badRequest("turns is empty")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		n, err := rt.Node(id)
		if err != nil {
			return 0, nil, err
		}
		if n.Status != store.NodeActive {
			return 0, nil, conflict("node %d is %s; turns go to active nodes", id, n.Status)
		}
		if *req.From > n.Turns {
			return 0, nil, conflict("from %d leaves a gap after node %d's %d turns", *req.From, id, n.Turns)
		}
		if err := rt.AppendTurns(id, *req.From, req.Turns...); err != nil {
			return 0, nil, err
		}
		if req.EnvState != nil {
			if err := rt.SetEnvState(id, req.EnvState); err != nil {
				return 0, nil, err
			}
		}
		if n, err = rt.Node(id); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, AppendTurnsResponse{Node: id, From: *req.From, Count: len(req.Turns), Turns: n.Turns}, nil
	})
}

// FinishRequest is POST /api/v1/runs/{run}/nodes/{node}/finish: an active
// branch that ended becomes a leaf, completed (the episode ended) or
// truncated (a turn cap), with its outcome reward. For a pruned leaf, status
// "pruned" replaces the reward routing gave it.
type FinishRequest struct {
	Keyed
	Status store.NodeStatus `json:"status"`
	Reward *float64         `json:"reward"`
}

// FinishResponse answers POST .../finish.
type FinishResponse struct {
	Node store.Node `json:"node"`
}

func (s *server) finishNode(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "node")
	if err != nil {
		return err
	}
	var req FinishRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	switch req.Status {
	case store.NodeCompleted, store.NodeTruncated, store.NodePruned:
	default:
		return badRequest("status %q: want completed, truncated or pruned", req.Status)
	}
	if req.Reward == nil {
		return badRequest("reward is required")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		n, err := rt.Node(id)
		if err != nil {
			return 0, nil, err
		}
		g, err := rt.GroupAt(n.Step, n.Group)
		if err != nil {
			return 0, nil, err
		}
		if g.Status != store.GroupOpen {
			return 0, nil, conflict("group %d of node %d is %s", g.ID, id, g.Status)
		}
		switch {
		case req.Status == store.NodePruned && n.Status != store.NodePruned:
			return 0, nil, conflict("node %d is %s, not pruned; routing prunes branches", id, n.Status)
		case req.Status != store.NodePruned && n.Status != store.NodeActive:
			return 0, nil, conflict("node %d is %s; only an active branch finishes", id, n.Status)
		}
		if err := rt.SetReward(id, *req.Reward); err != nil {
			return 0, nil, err
		}
		if req.Status != store.NodePruned {
			if err := rt.SetNodeStatus(id, req.Status); err != nil {
				return 0, nil, err
			}
		}
		var out FinishResponse
		out.Node, err = rt.Node(id)
		return http.StatusOK, out, err
	})
}
