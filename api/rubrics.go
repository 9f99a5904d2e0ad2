package api

import "github.com/patrdb/patrdb/model"

// JudgeAnswer is a judge's verdict on a pair as it was shown: A first.
// Rubric names an active rubric; Draft (its text) a draft being admitted.
type JudgeAnswer struct {
	Rubric uint64 `json:"rubric,omitempty"`
	Draft  string `json:"draft,omitempty"`
	A      uint64 `json:"a"`
	B      uint64 `json:"b"`
	Result string `json:"result"` // "a", "b" or "tie"
}

// LeafOutcome is the outcome measure of a leaf that rubrics are correlated
// with (ARBOR: token F1 against the gold answer).
type LeafOutcome struct {
	Leaf    uint64   `json:"leaf"`
	Outcome *float64 `json:"outcome"`
}

// ShapeAnswers is what a client answers the pool with. Drafts and
// Consolidation are null until answered; an empty list is an answer.
type ShapeAnswers struct {
	// Outcomes default to the token F1 of each leaf's last action against
	// the group's gold answer, or to the leaf's reward when there is no gold.
	Outcomes      []LeafOutcome         `json:"outcomes,omitempty"`
	Judgements    []JudgeAnswer         `json:"judgements,omitempty"`
	Drafts        *[]model.Draft        `json:"drafts,omitempty"`
	Consolidation *[]model.Consolidated `json:"consolidation,omitempty"`
}

// JudgeNeed is a pair to judge under a rubric (or a draft, Rubric 0), shown
// in this order.
type JudgeNeed struct {
	Rubric uint64 `json:"rubric,omitempty"`
	Draft  string `json:"draft,omitempty"`
	Text   string `json:"text"`
	A      uint64 `json:"a"`
	B      uint64 `json:"b"`
}

// InduceNeed asks for draft rubrics contrasting Best with Worst and with
// Hard (node ids; read their trajectories).
type InduceNeed struct {
	Best  uint64 `json:"best"`
	Worst uint64 `json:"worst"`
	Hard  uint64 `json:"hard"`
}

// ConsolidateNeed asks for general rubrics abstracting the candidate drafts
// (each output absorbs one or more draft ids; drafts none absorbs are
// dropped), given the public pool.
type ConsolidateNeed struct {
	Drafts []model.Rubric `json:"drafts"`
	Public []model.Rubric `json:"public"`
}

// ShapeNeeds is everything Prepare asked that the answers did not cover.
type ShapeNeeds struct {
	Judge       []JudgeNeed      `json:"judge,omitempty"`
	Induce      *InduceNeed      `json:"induce,omitempty"`
	Consolidate *ConsolidateNeed `json:"consolidate,omitempty"`
}

// ShapeRequest is POST /api/v1/runs/{run}/groups/{group}/shape (no write,
// so no client key).
type ShapeRequest struct {
	ShapeAnswers
}

// ShapeResponse answers .../shape. When Complete, Scores (one per leaf, in
// leaf id order) are the centred rubric scores the close would use, and the
// rest says what the pool would decide.
type ShapeResponse struct {
	Complete bool        `json:"complete"`
	Needs    ShapeNeeds  `json:"needs"`
	Leaves   []uint64    `json:"leaves"`
	Scores   []LeafScore `json:"scores,omitempty"`
	model.PoolDecision
}

// ActivateRequest is POST /api/v1/runs/{run}/rubrics/activate.
type ActivateRequest struct {
	Keyed
	Step uint64 `json:"step"`
}

// ActiveRubrics answers activate and GET .../rubrics/active?step=N: the
// public rubrics the step activated, in id order.
type ActiveRubrics struct {
	Step   uint64         `json:"step"`
	Active []model.Rubric `json:"active"`
}

// Empty reports whether nothing is left to ask: the shaping is complete.
func (n ShapeNeeds) Empty() bool { return len(n.Judge) == 0 && n.Induce == nil && n.Consolidate == nil }
