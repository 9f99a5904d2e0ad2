package main

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Exit codes (cmd/patrdb/README.md).
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

// notFoundError matches model.ErrNotFound, so callers can test for it with
// errors.Is like any store error.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == model.ErrNotFound }

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
	if errors.Is(err, model.ErrNotFound) {
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

// explain adds what the user needs to a command's error: damage is
// worded by damaged; a full disk (or quota) says so and what to do.
func (a *App) explain(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, store.ErrFull) {
		return &codeError{exitUsage, fmt.Errorf("%s: the disk or the file's size cap is full: free space (patrdb compact --out writes a smaller copy), or write elsewhere", errorText(err))}
	}
	if errors.Is(err, store.ErrNeedsMigration) {
		return &codeError{exitUsage, fmt.Errorf("%s: copy it into the current format with patrdb migrate %s NEW.db, then use the copy", errorText(err), a.dbPath)}
	}
	return a.damaged(err)
}

// damagedError: what the command was reading is damaged. It matches
// store.ErrCorrupt.
type damagedError struct{ msg string }

func (e *damagedError) Error() string        { return e.msg }
func (e *damagedError) Is(target error) bool { return target == store.ErrCorrupt }

// damaged words damage met while reading the way every command reports it:
// which run (or the file), where in it, and the next step. Exit 2: the
// command could not do its job; only check's own verdict is exit 1.
func (a *App) damaged(err error) error {
	var de *damagedError
	if errors.As(err, &de) || !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	what, detail := a.dbPath, strings.TrimPrefix(errorText(err), "corrupt: ")
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		where := ce.Bucket
		if rest, ok := strings.CutPrefix(ce.Bucket, "runs/"); ok {
			id, sub, _ := strings.Cut(rest, "/")
			what, where = fmt.Sprintf("run %q in %s", id, a.dbPath), sub
		}
		if where == "(file)" {
			where = ""
		}
		detail = strings.TrimPrefix(ce.Reason, a.dbPath+": ") // the path is said once
		if ce.Key != nil {
			detail = fmt.Sprintf("key %x: %s", ce.Key, ce.Reason)
		}
		if where != "" {
			detail = where + ": " + detail
		}
	}
	return &codeError{exitUsage, &damagedError{fmt.Sprintf("%s is damaged (%s): run patrdb check --db %s to list the damage", what, detail, a.dbPath)}}
}
