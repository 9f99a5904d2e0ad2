package server

import (
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"strings"
	"syscall"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// Sentinel errors of the package. Errors from the store keep their own
// sentinels (model.ErrNotFound, ...), so callers test both with errors.Is.
var (
	// ErrInvalidOptions: an Options field is out of range.
	ErrInvalidOptions = errors.New("server: invalid options")

	// ErrTokenRequired: a non-loopback address was asked for without a
	// bearer token (CheckBind).
	ErrTokenRequired = errors.New("server: a non-loopback address needs a bearer token (--token-file)")

	// ErrBadToken: the token file is missing, empty or too short.
	ErrBadToken = errors.New("server: unusable token file")

	// ErrNoServer: no serve address file sits next to a database file, or
	// the address in it does not answer (Discover).
	ErrNoServer = errors.New("server: no live server for this file")
)

// apiError is an error with the HTTP status it is answered with. Every
// error response is one line of JSON: {"error": "...", "code": "..."}.
type apiError struct {
	status int
	code   string
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, "bad_request", fmt.Errorf("%w: %s", api.ErrBadRequest, fmt.Sprintf(format, args...))}
}

func conflict(format string, args ...any) error {
	return &apiError{http.StatusConflict, "conflict", fmt.Errorf("%w: %s", api.ErrConflict, fmt.Sprintf(format, args...))}
}

func notFound(format string, args ...any) error {
	return &apiError{http.StatusNotFound, "not_found", fmt.Errorf("%w: %s", model.ErrNotFound, fmt.Sprintf(format, args...))}
}

func withStatus(status int, code string, err error) error {
	return &apiError{status, code, err}
}

// classify maps an error to its status and code: an apiError keeps its own;
// store and config sentinels map by kind; anything else is a 500, whose
// message is still one line but says no more than "internal error" plus the
// error (the handler logs it).
func classify(err error) (int, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code
	case errors.Is(err, model.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, model.ErrExists):
		return http.StatusConflict, "exists"
	case errors.Is(err, store.ErrStepCompleted):
		return http.StatusConflict, "conflict"
	case errors.Is(err, rollout.ErrConflict):
		for _, k := range api.ConflictCodes {
			if errors.Is(err, k.Err) {
				return http.StatusConflict, k.Code
			}
		}
		return http.StatusConflict, "conflict"
	case errors.Is(err, model.ErrInvalid), errors.Is(err, tree.ErrInvalidConfig), errors.Is(err, tree.ErrInvalidShaping), errors.Is(err, rubricpool.ErrInvalidConfig):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, store.ErrReadOnly):
		return http.StatusForbidden, "read_only"
	case errors.Is(err, store.ErrNeedsMigration):
		// The file reads as it is; only `patrdb migrate` makes it writable.
		return http.StatusConflict, "needs_migration"
	case errors.Is(err, store.ErrFull), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return http.StatusInsufficientStorage, "full"
	case errors.Is(err, store.ErrCorrupt):
		return http.StatusInternalServerError, "damaged"
	case errors.Is(err, store.ErrTimeout):
		return http.StatusServiceUnavailable, "locked"
	case errors.Is(err, store.ErrClosed):
		return http.StatusServiceUnavailable, "closed"
	}
	return http.StatusInternalServerError, "internal"
}

// oneLine folds a joined or wrapped multi-line error into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}

// damaged reports whether err is damage the run's check or a read found:
// what a listing marks on the run's row before it goes on to the others.
func damaged(err error) bool {
	_, code := classify(err)
	return err != nil && code == "damaged"
}
