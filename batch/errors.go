package batch

import "errors"

// ErrInvalidOptions: an Options field is out of range (an unknown layout,
// an empty policy-version window). It also matches model.ErrInvalid.
var ErrInvalidOptions = errors.New("batch: invalid options")

// ErrNotBatch: a safetensors file that is not a batch this package wrote
// (a missing or mis-shaped tensor, unknown layout). Damage to the file's
// framing is safetensors.ErrFormat; both are reported together.
var ErrNotBatch = errors.New("batch: not a patrdb batch file")

// ErrOutOfRange: a value the step holds does not fit the tensor that
// would carry it (a token id of 2^31 or more in an int32 input_ids, a
// policy version beyond int64, a row longer than int32 positions count).
// The batch is refused rather than written with the value wrapped. It
// also matches model.ErrInvalid.
var ErrOutOfRange = errors.New("batch: value out of range")

// ErrSource: a Source that does not hold together (a path through a node
// it lacks, a turn's arrays not whole words, leaves out of order), such as
// a damaged one from the wire. Nothing is built from it.
var ErrSource = errors.New("batch: inconsistent source")
