package server

import (
	"net/http"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

func (s *server) closeGroup(w http.ResponseWriter, r *http.Request) error {
	var req CloseGroupRequest
	c, gid, err := s.rolloutRequest(w, r, "group", &req)
	if err != nil {
		return err
	}
	run := c.Run()
	scores := map[uint64]float64{}
	for i, ls := range req.RubricScores {
		switch {
		case ls.Leaf == 0:
			return badRequest("rubric_scores[%d]: leaf is required", i)
		case ls.Score == nil:
			return badRequest("rubric_scores[%d]: score is required", i)
		case !(*ls.Score >= -1 && *ls.Score <= 1):
			return badRequest("rubric_scores[%d]: score %v is outside [-1,1] (scores are win rates centred within the group)", i, *ls.Score)
		}
		if _, dup := scores[ls.Leaf]; dup {
			return badRequest("rubric_scores[%d]: leaf %d is scored twice", i, ls.Leaf)
		}
		scores[ls.Leaf] = *ls.Score
	}
	if req.Lambda != nil && !(*req.Lambda >= 0) {
		return badRequest("lambda %v: want a value >= 0", *req.Lambda)
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
		case len(scores) > 0:
			if shaping, err = scoreShaping(c, tx, g, scores, req); err != nil {
				return 0, nil, err
			}
		}
		gr, err := c.Close(tx, g.Step, g.ID, shaping, 0)
		if err != nil {
			return 0, nil, err
		}
		if gr.Advantages == nil {
			gr.Advantages = []store.Advantage{}
		}
		return http.StatusOK, CloseGroupResponse{Group: gr.Group, Advantages: gr.Advantages}, nil
	})
}

// scoreShaping lines the client's rubric scores up with the group's leaves.
func scoreShaping(c *tree.Coordinator, tx *store.Tx, g store.Group, scores map[uint64]float64, req CloseGroupRequest) (*tree.Shaping, error) {
	_, leaves, err := c.Leaves(tx, g.Step, g.ID, false)
	if err != nil {
		return nil, err
	}
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
	for _, l := range leaves {
		sc, ok := scores[l.Node.ID]
		if !ok {
			return nil, badRequest("rubric_scores has no score for leaf %d", l.Node.ID)
		}
		shaping.Scores = append(shaping.Scores, sc)
	}
	if len(scores) != len(leaves) {
		return nil, badRequest("rubric_scores names %d nodes, but group %d has %d leaves", len(scores), g.ID, len(leaves))
	}
	for _, id := range req.Rubrics {
		if _, err := rt.Rubric(id); err != nil {
			return nil, err
		}
	}
	return shaping, nil
}
