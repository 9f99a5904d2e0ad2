package api

import "github.com/patrdb/patrdb/model"

// LeafScore is a leaf's rubric score, centred within its group.
type LeafScore struct {
	Leaf  uint64   `json:"leaf"`
	Score *float64 `json:"score"`
}

// CloseGroupRequest is POST /api/v1/runs/{run}/groups/{group}/close. With
// RubricScores (one per leaf, each in [-1,1]) the advantages are computed on
// R = reward + Lambda·score; Lambda defaults to the run's rubric lambda.
type CloseGroupRequest struct {
	Keyed
	RubricScores []LeafScore `json:"rubric_scores,omitempty"`
	Lambda       *float64    `json:"lambda,omitempty"`
	Rubrics      []uint64    `json:"rubrics,omitempty"` // the rubric ids the scores came from
	// Pool, instead of RubricScores, shapes the group with the run's rubric
	// buffer: the answers the .../shape exchange gathered.
	Pool *ShapeAnswers `json:"pool,omitempty"`
}

// CloseGroupResponse answers POST .../close: the closed group and one
// advantage record per leaf, in leaf id order.
type CloseGroupResponse struct {
	Group      model.Group       `json:"group"`
	Advantages []model.Advantage `json:"advantages"`
}
