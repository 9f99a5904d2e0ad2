package tree

import (
	"context"

	"github.com/patrdb/patrdb/store"
)

// Task is one prompt whose rollouts form a group.
type Task struct {
	ID     string
	Prompt string
	Gold   string // reference answer, when the task has one
	Meta   map[string]string
}

// TurnKey identifies the turn being sampled. Policies and environments draw
// their randomness from it (never from a shared stream), so replaying a
// prefix or resuming after a crash reproduces the same turns.
type TurnKey struct {
	Seed  int64
	Step  uint64
	Group uint64
	Node  uint64
	Index int // index among the node's own turns
	Path  int // position in the full trajectory (0 = first turn)
}

// Move is what the policy emits for one turn: the action text with its
// token ids and their logprobs.
type Move struct {
	Text     string
	Tokens   []uint32
	Logprobs []float32
}

// Observation is what the environment answers to an action.
type Observation struct {
	Text   string
	Tokens []uint32
	Reward float64
	Done   bool // the episode ended (success, failure or the env's own limit)
}

// Policy samples the next action for a history. history holds the full
// trajectory so far (inherited prefix included); it must not be modified.
type Policy interface {
	Act(ctx context.Context, key TurnKey, task Task, history []store.Turn) (Move, error)
}

// Env starts episodes and restores them at any prefix.
type Env interface {
	// Reset starts a fresh episode of task.
	Reset(ctx context.Context, task Task) (Episode, error)
	// Restore rebuilds the episode as it stood after history, from the
	// recorded turns or from state (the Episode.State recorded on the node,
	// nil if the env never gave one). A non-nil state is always the one the
	// episode reported right after the last turn of history: the engine
	// records it with every batch of turns it commits.
	Restore(ctx context.Context, task Task, history []store.Turn, state []byte) (Episode, error)
}

// Episode is one running environment instance.
type Episode interface {
	Step(ctx context.Context, key TurnKey, a Move) (Observation, error)
	// State is an opaque reference Restore accepts; nil when the env
	// restores from the recorded turns alone.
	State() []byte
}

// Scorer rates a partial trajectory in [0,1] (PaTR's process scorer).
type Scorer interface {
	Score(ctx context.Context, task Task, history []store.Turn) (float64, error)
}

// Leaf is a finished branch handed to a Shaper.
type Leaf struct {
	Node   store.Node
	Reward float64
	Turns  []store.PathTurn
}

// Shaping is a Shaper's verdict on one group: a centred score per leaf
// (aligned with the leaves it was given), the weight it enters the reward
// with, and the writes that record it, applied in the same transaction as
// the group's advantages.
type Shaping struct {
	Scores  []float64
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
	Prepare(ctx context.Context, step uint64, g store.Group, leaves []Leaf) (*Shaping, error)
}
