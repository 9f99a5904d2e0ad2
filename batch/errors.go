package batch

import "errors"

// ErrInvalidOptions: an Options field is out of range (an unknown layout,
// an empty policy-version window). It also matches store.ErrInvalid.
var ErrInvalidOptions = errors.New("batch: invalid options")

// ErrNotBatch: a safetensors file that is not a batch this package wrote
// (a missing or mis-shaped tensor, unknown layout). Damage to the file's
// framing is safetensors.ErrFormat; both are reported together.
var ErrNotBatch = errors.New("batch: not a patrdb batch file")
