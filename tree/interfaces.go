package tree

import (
	"context"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// TaskOf is the task a group was opened for.
func TaskOf(g model.Group) rollout.Task { return rollout.TaskOf(g) }

// Leaf is a finished branch handed to a Shaper.
type Leaf struct {
	Node   model.Node
	Reward float64
	Turns  []model.PathTurn
}

// Shaping is a Shaper's verdict on one group: a centred score per leaf,
// the weight it enters the reward with, and the writes that record it,
// applied in the same transaction as the group's advantages.
//
// Scores line up with the group's leaves in Leaves' order, or, when Leaf
// is set, Scores[i] is the score of leaf Leaf[i] (a caller that names its
// leaves, such as the HTTP API). Close holds every shaping to the rules in
// shaping.go and refuses one that breaks them with ErrInvalidShaping.
type Shaping struct {
	Scores  []float64
	Leaf    []uint64
	Lambda  float64
	Rubrics []uint64
	Apply   func(r *store.RunTx) error
}

// Shaper adds process rewards to a group's outcome rewards (ARBOR's rubric
// buffer). Prepare runs outside any write transaction, so slow judge calls
// never hold the file's writer lock; it may return a nil Shaping to leave a
// group plain GRPO (e.g. one too small to shape). BeginStep runs again when
// a step is resumed, and Prepare again for a group whose close did not
// commit.
type Shaper interface {
	BeginStep(ctx context.Context, step uint64) error
	Prepare(ctx context.Context, step uint64, g model.Group, leaves []Leaf) (*Shaping, error)
}
