package tree

import "errors"

// Sentinel errors. Every error the package returns for a refused request
// wraps one of these (or one of the store's), so a caller — or the HTTP
// server mapping them to status codes — tests with errors.Is.
var (
	// ErrInvalidConfig is wrapped by every error Config.Validate returns,
	// so callers can tell a bad parameter from a storage or runtime failure.
	ErrInvalidConfig = errors.New("tree: invalid config")

	// ErrConflict: the request does not fit the rollout's current state
	// (a stale lease, a branch that already ended, a score before the
	// interval's K turns, ...). Nothing was written. Every error below
	// that is about state, not input, wraps it.
	ErrConflict = errors.New("tree: conflict")

	// ErrLeaseLost: the lease named by a submit is not the branch's
	// current one — it expired and was handed to another worker, the
	// interval it was granted for is over, or the coordinator restarted.
	// The worker drops its work and asks for a new lease.
	ErrLeaseLost = wrapConflict("lease lost")

	// ErrTooEarly: a score arrived before the branch sampled the
	// interval's K turns.
	ErrTooEarly = wrapConflict("score before the interval's K turns")

	// ErrBranchEnded: turns or a score for a branch that is no longer
	// active (it finished, was pruned or expanded, or failed).
	ErrBranchEnded = wrapConflict("branch is not active")

	// ErrStepExists: a step already holds groups for other tasks.
	ErrStepExists = wrapConflict("step already opened with other tasks")

	// ErrConfigMismatch: the run recorded another tree config than the
	// one given; the message names every differing field.
	ErrConfigMismatch = wrapConflict("config differs from the run's recorded config")

	// ErrNoOpenStep: Resume found nothing to resume.
	ErrNoOpenStep = errors.New("tree: no open groups to resume")
)

// conflictError is a named kind of ErrConflict.
type conflictError struct{ what string }

func wrapConflict(what string) error { return &conflictError{what} }

func (e *conflictError) Error() string        { return "tree: " + e.what }
func (e *conflictError) Is(target error) bool { return target == ErrConflict }
