package model

import "errors"

// The data model's refusals. Package store returns them wrapped with
// context (and its own sentinels for everything about the file); package
// client maps the HTTP statuses back to them, so a caller tests with
// errors.Is on either side of the wire.
var (
	// ErrNotFound: the run, group, node, turn, rubric or checkpoint asked
	// for does not exist.
	ErrNotFound = errors.New("patrdb: not found")

	// ErrInvalid: the input breaks a rule of the data model (NaN score,
	// fork point past the parent's turns, forbidden status change, bad run
	// id, ...). The transaction that saw it does not commit.
	ErrInvalid = errors.New("patrdb: invalid input")

	// ErrExists: a record with that identity already exists (run id, node
	// ordinal under a parent, rubric id).
	ErrExists = errors.New("patrdb: already exists")
)
