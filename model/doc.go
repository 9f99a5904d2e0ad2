// Package model is patrdb's data model: the records a run is made of (Run,
// Group, Node, Turn, Advantage, Rubric, Checkpoint, Scalars, Event), the
// words they use (statuses, routing actions, rubric pools, event kinds), the
// figures computed from them (RunSummary, StepSummary, StepMetrics,
// Staleness) and the three refusals every layer shares (ErrNotFound,
// ErrInvalid, ErrExists).
//
// It imports only the standard library, so a program that only speaks the
// vocabulary — the HTTP client, an exporter, a test — links none of the
// storage engine. Package store persists these records; the msgpack field
// tags here are its byte format (an `as_array` struct is encoded as a
// positional array, so fields are only ever appended), and the json tags are
// the one JSON vocabulary of the CLI, the HTTP API, the Python client and the
// exports. store's package documentation draws how they sit in the file.
//
// Token arrays (TokenIDs, Logprobs) decode from JSON either as number arrays
// or packed (base64 of little-endian uint32 / float32 words), so a client can
// send whichever is cheaper for it; AppendWords, Words, AppendFloats and
// Floats are that packing.
package model
