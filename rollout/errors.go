package rollout

import "errors"

// The protocol's refusals. Every one wraps ErrConflict; package tree
// returns them (under the same names) and the server answers them with a
// 409 whose code names the kind, which package client maps back, so a
// worker tests for them with errors.Is on either side of the wire.
var (
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

	// ErrNotHolder: a submit, renewal or release names a lease granted to
	// another worker. Lease ids are unguessable; this catches a worker that
	// got one wrong.
	ErrNotHolder = wrapConflict("lease held by another worker")

	// ErrStale: the worker's policy version, or a submitted turn's, lags
	// the run's current version by more than the run's max_staleness; the
	// message names the versions. Load newer weights and lease again.
	ErrStale = wrapConflict("policy version too stale")

	// ErrNotPending: a deferred reward or a remote score for a branch that
	// does not await one (it has its reward, is still sampling, or the
	// interval moved on).
	ErrNotPending = wrapConflict("branch awaits no such reward or score")
)

// conflictError is a named kind of ErrConflict.
type conflictError struct{ what string }

func wrapConflict(what string) error { return &conflictError{what} }

func (e *conflictError) Error() string        { return "tree: " + e.what }
func (e *conflictError) Is(target error) bool { return target == ErrConflict }
