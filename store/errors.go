package store

import (
	"errors"
	"fmt"

	"github.com/patrdb/patrdb/model"
)

// Sentinel errors. Every error the package returns wraps one of these, so
// callers test with errors.Is and never by string.
var (

	// ErrStepCompleted: a checkpoint names a step the run has completed
	// already (steps complete in order, each once). The transaction that
	// saw it does not commit.
	ErrStepCompleted = errors.New("patrdb: step already completed")

	// ErrCorrupt marks a value that fails its CRC or does not decode, or a
	// file whose structure is damaged. Always wrapped in *CorruptError when
	// the damage has a location.
	ErrCorrupt = errors.New("patrdb: corrupt")

	// ErrVersionMismatch: the file was written by a newer format than this
	// build understands. The file is left untouched.
	ErrVersionMismatch = errors.New("patrdb: unsupported format version")

	// ErrNeedsMigration: the file is an older format this build reads but
	// does not write; a migrated copy (Migrate) takes writes. The file is
	// left untouched.
	ErrNeedsMigration = errors.New("patrdb: file needs migrating to the current format")

	// ErrNotPatrdb: the file is a bbolt file (or not even that) without the
	// patrdb meta bucket.
	ErrNotPatrdb = errors.New("patrdb: not a patrdb file")

	// ErrTimeout: another process holds the file's lock for longer than
	// Options.Timeout.
	ErrTimeout = errors.New("patrdb: timeout waiting for the file lock")

	// ErrReadOnly: a write was attempted on a DB opened with ReadOnly.
	ErrReadOnly = errors.New("patrdb: database is read-only")

	// ErrFull: the write would grow the file past Options.MaxSize. The
	// transaction is rolled back; earlier data is intact.
	ErrFull = errors.New("patrdb: database reached MaxSize")

	// ErrClosed: the DB has been closed.
	ErrClosed = errors.New("patrdb: database closed")

	// ErrTxDone: a Tx was used after its Update or View returned.
	ErrTxDone = errors.New("patrdb: transaction closed")
)

// CorruptError says where damage was found. It matches ErrCorrupt.
type CorruptError struct {
	Bucket string // path of the bucket, e.g. "runs/r1/nodes"
	Key    []byte // the key whose value is damaged; nil for structural damage
	Reason string
}

func (e *CorruptError) Error() string {
	if e.Key == nil {
		return fmt.Sprintf("patrdb: corrupt: %s: %s", e.Bucket, e.Reason)
	}
	return fmt.Sprintf("patrdb: corrupt value at %s key %x: %s", e.Bucket, e.Key, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true for a *CorruptError.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// invalidf builds an ErrInvalid with context.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", model.ErrInvalid, fmt.Sprintf(format, args...))
}

// notFoundf builds an ErrNotFound with context.
func notFoundf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", model.ErrNotFound, fmt.Sprintf(format, args...))
}

// existsf builds an ErrExists with context.
func existsf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", model.ErrExists, fmt.Sprintf(format, args...))
}
