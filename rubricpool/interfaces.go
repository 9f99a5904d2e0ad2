package rubricpool

import (
	"context"
	"github.com/patrdb/patrdb/model"
)

// Trajectory is one member of a group as the pool sees it: a leaf node, its
// base reward, the outcome measure rubrics are correlated with, and its
// turns for the inducer and judge to read.
type Trajectory struct {
	Node uint64
	// Reward is R_base, the outcome reward GRPO would use unshaped. Pairs
	// are planned in its order (PairSet) and zero variance is taken on it.
	Reward float64
	// Outcome is the measure anchors are picked by and rubrics must agree
	// with (admission and the running correlation): TokenF1 of the answer
	// against the gold one (F1Outcome), or, for a task with no gold text,
	// whatever graded success the caller has. Often equal to Reward.
	Outcome float64
	// Turns is the full trajectory, root first. Inducers and judges must
	// not modify it.
	Turns []model.PathTurn
}

// F1Outcome is the outcome measure of ARBOR's QA tasks: the SQuAD token F1
// of the trajectory's answer, taken as the last turn's action text, against
// the group's gold answer. A trajectory with no turns answers "".
func F1Outcome(group model.Group, turns []model.PathTurn) float64 {
	answer := ""
	if len(turns) > 0 {
		answer = turns[len(turns)-1].Action
	}
	return TokenF1(answer, group.Gold)
}

// InduceInput is what contrastive induction sees: the group and its three
// anchors (PickAnchors over Outcome). The inducer contrasts (Best, Worst)
// and (Best, Hard).
type InduceInput struct {
	Step              uint64
	Group             model.Group
	Best, Worst, Hard Trajectory
}

// Inducer writes draft rubrics from a group's anchors (an LLM in ARBOR).
// Every draft must have a non-empty text; an empty list is fine.
type Inducer interface {
	Induce(ctx context.Context, in InduceInput) ([]model.Draft, error)
}

// Consolidator turns the candidate pool into public rubrics (an LLM in
// ARBOR). drafts are every candidate, public the current public pool, both
// in id order and both copies. Each output must have a non-empty text and
// absorb at least one draft; a draft may be absorbed by one output only.
// Drafts no output absorbs are dropped (retired) so the candidate pool
// empties at every consolidation.
type Consolidator interface {
	Consolidate(ctx context.Context, drafts []model.Rubric, public []model.Rubric) ([]model.Consolidated, error)
}

// Judge compares two trajectories under one rubric (an LLM in ARBOR). It
// answers about a and b in the order it was shown them: AWins means a is
// better. The pool randomises that order (Swap) and undoes it. A draft that
// is not yet admitted is shown with ID 0.
type Judge interface {
	Judge(ctx context.Context, rubric model.Rubric, a, b Trajectory) (Outcome, error)
}
