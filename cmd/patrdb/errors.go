package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/patrdb/patrdb/store"
)

// Exit codes (DESIGN.md §7).
const (
	exitOK    = 0
	exitFail  = 1 // not found, or check failed
	exitUsage = 2 // usage or I/O error
)

// codeError carries the exit code the CLI should end with.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// commandError marks an error returned by a command's RunE (as opposed to
// one cobra raised while parsing the command line).
type commandError struct{ err error }

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }

// usageErrorf: a bad argument or flag value. Exit 2.
func usageErrorf(format string, args ...any) error {
	return &codeError{exitUsage, fmt.Errorf(format, args...)}
}

// notFoundErrorf: the run, group, node or rubric asked for does not exist.
// Exit 1. The message names what was not found.
func notFoundErrorf(format string, args ...any) error {
	return &codeError{exitFail, &notFoundError{fmt.Sprintf(format, args...)}}
}

// notFoundError matches store.ErrNotFound, so callers can test for it with
// errors.Is like any store error.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == store.ErrNotFound }

// failedErrorf: the command ran but its answer is "no" (check found
// violations). Exit 1.
func failedErrorf(format string, args ...any) error {
	return &codeError{exitFail, fmt.Errorf(format, args...)}
}

// exitCode maps an error to the exit status: an explicit code wins; a store
// ErrNotFound is 1; anything else — usage, lock timeout, a file that is not
// patrdb or is too new, corruption met while reading, I/O — is 2.
func exitCode(err error) int {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	if errors.Is(err, store.ErrNotFound) {
		return exitFail
	}
	return exitUsage
}

// errorLine renders err as the single line the CLI prints: "patrdb: ...".
func errorLine(err error) string { return "patrdb: " + errorText(err) }

// errorText is err's message on one line, without the store's own
// "patrdb: " prefix (so it is never repeated) and with any newline (a
// joined error) folded into "; ".
func errorText(err error) string {
	msg := strings.TrimSpace(err.Error())
	msg = strings.TrimPrefix(msg, "patrdb: ")
	return strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}
