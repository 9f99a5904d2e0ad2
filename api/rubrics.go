package api

import "github.com/patrdb/patrdb/store"

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
	Outcomes      []LeafOutcome   `json:"outcomes,omitempty"`
	Judgements    []JudgeAnswer   `json:"judgements,omitempty"`
	Drafts        *[]Draft        `json:"drafts,omitempty"`
	Consolidation *[]Consolidated `json:"consolidation,omitempty"`
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
	Drafts []store.Rubric `json:"drafts"`
	Public []store.Rubric `json:"public"`
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
	PoolDecision
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
	Active []store.Rubric `json:"active"`
}

// Draft is one rubric an inducer proposes. Feature is an optional machine
// key for what it judges (stored with the rubric), which lets deterministic
// judges and consolidators work without parsing the text.
type Draft struct {
	Text    string `msgpack:"text" json:"text"`
	Feature string `msgpack:"feature,omitempty" json:"feature,omitempty"`
}

// Consolidated is one general rubric a consolidator writes, naming the
// candidate drafts (by id) it abstracts.
type Consolidated struct {
	Text    string   `msgpack:"text" json:"text"`
	Feature string   `msgpack:"feature,omitempty" json:"feature,omitempty"`
	Absorbs []uint64 `msgpack:"absorbs" json:"absorbs"`
}

// PoolDecision is what the rubric buffer decided for one group, as
// rubricpool's Prepare computes it (its GroupResult embeds one) and the
// shape endpoint serves it.
type PoolDecision struct {
	// Lambda is the rubric lambda when rubrics scored the group, else 0.
	Lambda float64 `json:"lambda"`
	// Rubrics are the ids of the rubrics that scored the group, in id
	// order (nil when none did).
	Rubrics []uint64 `json:"rubrics,omitempty"`
	// ZeroVariance and ZeroVarianceAfter: whether the base rewards, and the
	// shaped ones, are all equal. Unlocked is the first without the second.
	ZeroVariance      bool `json:"zero_variance"`
	ZeroVarianceAfter bool `json:"zero_variance_after"`
	Unlocked          bool `json:"unlocked"`

	// What the pool decided, for logs and progress displays.
	Drafts       int      `json:"drafts"`              // drafts the inducer wrote (0 when not induced)
	Admitted     []uint64 `json:"admitted,omitempty"`  // new candidates
	Rejected     int      `json:"rejected"`            // drafts that failed admission
	Supported    []uint64 `json:"supported,omitempty"` // rubrics a near-duplicate draft added support to
	Consolidated bool     `json:"consolidated"`
	NewPublic    []uint64 `json:"new_public,omitempty"` // public rubrics created by consolidation
	Merged       []uint64 `json:"merged,omitempty"`     // drafts merged into public rubrics
	Retired      []uint64 `json:"retired,omitempty"`    // public rubrics retired, then candidates dropped
}

// Empty reports whether nothing is left to ask: the shaping is complete.
func (n ShapeNeeds) Empty() bool { return len(n.Judge) == 0 && n.Induce == nil && n.Consolidate == nil }
