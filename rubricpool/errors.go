package rubricpool

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns for a bad call wraps one
// of these (or a store sentinel such as model.ErrNotFound for a missing run
// or group), so callers test with errors.Is.
var (
	// ErrInvalidConfig is wrapped by every error Config.Validate returns, so
	// callers can test with errors.Is and still read which field was wrong
	// from the message. New returns it too for a missing DB or interface.
	ErrInvalidConfig = errors.New("rubricpool: invalid config")

	// ErrInvalidInput: the caller passed something the pool cannot use: step
	// 0, a step before one already begun, a trajectory with a NaN reward or
	// outcome, a repeated or foreign node, a GroupResult applied to another
	// run. Nothing is written.
	ErrInvalidInput = errors.New("rubricpool: invalid input")

	// ErrInvalidOutput: an Inducer, Consolidator or Judge returned something
	// the pool cannot record (an invalid Outcome, an empty draft, a
	// consolidation naming an unknown or non-candidate draft, ...). Always
	// wrapped in an *OutputError. Nothing is written.
	ErrInvalidOutput = errors.New("rubricpool: invalid output")

	// ErrStale: GroupResult.Apply found the stored rubrics different from
	// what Prepare read, so its decisions may no longer hold (another group
	// was applied in between, or the next step began). Apply writes nothing;
	// prepare the group again.
	ErrStale = errors.New("rubricpool: rubric pool changed since Prepare")

	// ErrStepNotBegun: Prepare was called for a step whose activation
	// (BeginStep) is not on record while public rubrics were eligible.
	ErrStepNotBegun = errors.New("rubricpool: step not begun")

	// ErrGroupDone: the group is closed or already has advantage records, so
	// its shaping was applied before; shaping it again would count its
	// statistics twice.
	ErrGroupDone = errors.New("rubricpool: group already shaped")
)

// OutputError says which interface returned what. It matches
// ErrInvalidOutput.
type OutputError struct {
	Source string // "inducer", "consolidator" or "judge"
	Reason string
}

func (e *OutputError) Error() string {
	return fmt.Sprintf("rubricpool: invalid output from the %s: %s", e.Source, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidOutput) true for an *OutputError.
func (e *OutputError) Is(target error) bool { return target == ErrInvalidOutput }

func outputf(source, format string, args ...any) error {
	return &OutputError{Source: source, Reason: fmt.Sprintf(format, args...)}
}

func inputf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}
