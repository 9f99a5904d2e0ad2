package frozenlake

import (
	"sync"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// An env-step budget is enforced by the environment, not by counting whole
// training steps: once the budget is spent, every further move a branch asks
// for is refused — the engine still records the turn (it records every turn
// it asks for), but the turn is marked as not played, ends the episode with
// reward 0, and counts neither as an env step nor as a training sample. So a
// run with budget N plays exactly N env steps whenever its last step wanted
// at least that many, and two modes given the same N spent exactly the same.
// Which branches the cut falls on follows the engine's order of turns, which
// is deterministic, so a resumed run cuts where an uninterrupted one would.

// cutObservation is the text of a turn the budget refused.
const cutObservation = "not played: env-step budget spent"

// Played reports whether the environment played t: a played turn carries
// the position it led to; a turn the budget cut carries none.
func Played(t model.Turn) bool { return len(t.ObservationTokens) == 1 }

// Budget is the env steps a run may still play, shared by every episode of
// it. A nil *Budget is unlimited.
type Budget struct {
	mu   sync.Mutex
	left int
}

// NewBudget returns a budget of n env steps.
func NewBudget(n int) *Budget { return &Budget{left: n} }

// take spends one env step, reporting false when none is left.
func (b *Budget) take() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

// set replaces what is left.
func (b *Budget) set(n int) {
	b.mu.Lock()
	b.left = n
	b.mu.Unlock()
}

// cutLeaf reports whether the budget ended n: its last turn was refused.
// Only a completed branch without reward can end in a refused turn.
func cutLeaf(r *store.RunTx, n model.Node) (bool, error) {
	if n.Turns == 0 || n.Status != model.NodeCompleted || n.Reward != 0 {
		return false, nil
	}
	last, err := r.Turn(n.ID, n.Turns-1)
	if err != nil {
		return false, err
	}
	return !Played(last), nil
}
