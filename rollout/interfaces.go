package rollout

import (
	"context"

	"github.com/patrdb/patrdb/model"
)

// Task is one prompt whose rollouts form a group.
type Task struct {
	ID           string            `json:"id"`
	Prompt       string            `json:"prompt"`
	PromptTokens []uint32          `json:"prompt_tokens,omitempty"` // the prompt's token ids, when the trainer has them
	Gold         string            `json:"gold,omitempty"`          // reference answer, when the task has one
	Meta         map[string]string `json:"meta,omitempty"`
}

// TaskOf is the task a group was opened for.
func TaskOf(g model.Group) Task {
	return Task{ID: g.Task, Prompt: g.Prompt, PromptTokens: g.PromptTokens, Gold: g.Gold, Meta: g.Meta}
}

// TurnKey identifies the turn being sampled. Policies and environments draw
// their randomness from it (never from a shared stream), so replaying a
// prefix or resuming after a crash reproduces the same turns.
//
// Node ids depend on the order in which groups finish their intervals,
// which many concurrent workers do not fix; Branch does not: it hashes the
// group and the ordinals from the root down, so a policy keyed by Branch
// samples the same tree however the work was spread.
type TurnKey struct {
	Seed    int64  `json:"seed"`
	Step    uint64 `json:"step"`
	Group   uint64 `json:"group"`
	Node    uint64 `json:"node"`
	Branch  uint64 `json:"branch"`  // stable identity of the branch (see above)
	Index   int    `json:"index"`   // index among the node's own turns
	Path    int    `json:"path"`    // position in the full trajectory (0 = first turn)
	Attempt int    `json:"attempt"` // retries of the branch so far (a retry may sample differently)
}

// Move is what the policy emits for one turn: the action text with its
// token ids and their logprobs.
type Move struct {
	Text     string
	Tokens   []uint32
	Logprobs []float32 // one per token, each <= 0, or none
	// PolicyVersion is the version of the weights that sampled the move
	// (0: the engine's Options.PolicyVersion).
	PolicyVersion uint64
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
	Act(ctx context.Context, key TurnKey, task Task, history []model.Turn) (Move, error)
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
	Restore(ctx context.Context, task Task, history []model.Turn, state []byte) (Episode, error)
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
	Score(ctx context.Context, task Task, history []model.Turn) (float64, error)
}
