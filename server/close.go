package server

import (
	"net/http"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

func (s *server) closeGroup(w http.ResponseWriter, r *http.Request) error {
	var req api.CloseGroupRequest
	c, gid, err := s.rolloutRequest(w, r, "group", &req)
	if err != nil {
		return err
	}
	run := c.Run()
	for i, ls := range req.RubricScores {
		switch {
		case ls.Leaf == 0:
			return badRequest("rubric_scores[%d]: leaf is required", i)
		case ls.Score == nil:
			return badRequest("rubric_scores[%d]: score is required", i)
		}
	}
	if len(req.RubricScores) == 0 && (req.Lambda != nil || len(req.Rubrics) > 0) {
		return badRequest("lambda and rubrics need rubric_scores")
	}
	if req.Pool != nil && len(req.RubricScores) > 0 {
		return badRequest("give rubric_scores or pool, not both")
	}
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := tx.Run(run)
		if err != nil {
			return 0, nil, err
		}
		g, err := rt.Group(gid)
		if err != nil {
			return 0, nil, err
		}
		var shaping *tree.Shaping
		switch {
		case req.Pool != nil:
			if shaping, err = s.poolShaping(c, tx, g, *req.Pool); err != nil {
				return 0, nil, err
			}
		case len(req.RubricScores) > 0:
			if shaping, err = scoreShaping(c, tx, req); err != nil {
				return 0, nil, err
			}
		}
		gr, err := c.Close(tx, g.Step, g.ID, shaping, 0)
		if err != nil {
			return 0, nil, err
		}
		if gr.Advantages == nil {
			gr.Advantages = []model.Advantage{}
		}
		return http.StatusOK, api.CloseGroupResponse{Group: gr.Group, Advantages: gr.Advantages}, nil
	})
}

// scoreShaping is the client's rubric scores as a shaping, each named by
// its leaf; Close holds it to the rules. Lambda defaults to the run's.
func scoreShaping(c *tree.Coordinator, tx *store.Tx, req api.CloseGroupRequest) (*tree.Shaping, error) {
	rt, err := tx.Run(c.Run())
	if err != nil {
		return nil, err
	}
	cfg, err := configOf(rt)
	if err != nil {
		return nil, err
	}
	shaping := &tree.Shaping{Lambda: cfg.RubricOrDefault().Lambda, Rubrics: req.Rubrics}
	if req.Lambda != nil {
		shaping.Lambda = *req.Lambda
	}
	for _, ls := range req.RubricScores {
		shaping.Leaf = append(shaping.Leaf, ls.Leaf)
		shaping.Scores = append(shaping.Scores, *ls.Score)
	}
	for _, id := range req.Rubrics {
		if _, err := rt.Rubric(id); err != nil {
			return nil, err
		}
	}
	return shaping, nil
}
