package tree

import (
	"errors"
)

// Sentinel errors. Every error the package returns for a refused request
// wraps one of these (or one of the store's), so a caller — or the HTTP
// server mapping them to status codes — tests with errors.Is.
var (
	// ErrInvalidConfig is wrapped by every error Config.Validate returns,
	// so callers can tell a bad parameter from a storage or runtime failure.
	ErrInvalidConfig = errors.New("tree: invalid config")

	// ErrInvalidShaping: a Shaping given to Close breaks its rules (a
	// score outside [-1,1], a negative lambda, not one score per leaf).
	ErrInvalidShaping = errors.New("tree: invalid shaping")

	// ErrNoOpenStep: Resume found nothing to resume.
	ErrNoOpenStep = errors.New("tree: no open groups to resume")
)
