package replay

import "errors"

// Sentinel errors. Every error the package returns for bad input wraps one
// of these (or a store sentinel such as model.ErrNotFound for an unknown
// run), so callers test with errors.Is.
var (
	// ErrSeqRange: a sequence number past the run's last event, or a range
	// whose end comes before its start.
	ErrSeqRange = errors.New("replay: sequence number out of range")

	// ErrWhatIfKey: a what-if override names a key other than delta, m,
	// top, rule and max_active.
	ErrWhatIfKey = errors.New("replay: unknown what-if key")

	// ErrWhatIfValue: a what-if override is malformed (no "=", an empty or
	// repeated key, a value that does not parse) or yields a config that
	// fails tree.Config.Validate (then tree.ErrInvalidConfig is wrapped too).
	ErrWhatIfValue = errors.New("replay: bad what-if value")

	// ErrLog: the event log does not replay (an event refers to a group or
	// node no earlier event created, or sequence numbers go backwards).
	// It wraps store.ErrCorrupt as well: a log written by the store always
	// replays.
	ErrLog = errors.New("replay: event log does not replay")
)
