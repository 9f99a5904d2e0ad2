package api

import (
	"errors"
	"fmt"

	"github.com/patrdb/patrdb/rollout"
)

// PathVersion is the version in the API's path prefix (/api/v1). The
// major number of the API version the index reports (api_version,
// "<major>.<minor>") is always this one's, so a client that speaks this
// prefix can use any server whose major number matches.
const PathVersion = "v1"

var (
	// ErrBadRequest: the request could not be decoded (malformed JSON, an
	// unknown field, a wrong type, a missing or out-of-range value). The
	// server answers 400, 413 or 415.
	ErrBadRequest = errors.New("server: bad request")

	// ErrConflict: the request is well formed but the state forbids it (a
	// closed group, a node that is not active, a stale interval, a client
	// key reused for a different request). The server answers 409.
	ErrConflict = errors.New("server: conflict")

	// ErrFrame: a frame body (FrameType) that does not parse; it is an
	// ErrBadRequest too.
	ErrFrame = fmt.Errorf("%w: frame", ErrBadRequest)
)

// ConflictCodes are the codes of the rollout protocol's refusals in a 409's
// body, so a worker tells a lost lease (drop the work, lease again) from
// the rest.
var ConflictCodes = []struct {
	Err  error
	Code string
}{
	{rollout.ErrLeaseLost, "lease_lost"},
	{rollout.ErrTooEarly, "too_early"},
	{rollout.ErrBranchEnded, "branch_ended"},
	{rollout.ErrStepExists, "step_exists"},
	{rollout.ErrConfigMismatch, "config_mismatch"},
	{rollout.ErrNotHolder, "not_holder"},
	{rollout.ErrStale, "stale"},
	{rollout.ErrNotPending, "not_pending"},
}

// ErrorBody is the one-line JSON of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}
