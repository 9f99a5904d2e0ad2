package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/patrdb/patrdb/internal/publish"
)

// A command that writes output (export, compact, migrate, batch) builds it
// under a temporary name beside its destination and publishes it by one
// rename once complete (package publish). It watches the stop signals
// (Ctrl-C, a service manager's stop, a closed terminal) while it works:
// the first removes its temporary output at once and cancels its context,
// so the destination is either complete or absent; a second one ends the
// process at once (the temporary output is already gone by then). What a
// SIGKILL leaves behind is removed by the next output begun beside it.

// onStop returns a context cancelled by the first stop signal; cleanup,
// when not nil, runs as soon as it arrives, from another goroutine. Call
// stop when the command ends.
func onStop(ctx context.Context, cleanup func()) (_ context.Context, stop func()) {
	g, ctx := publish.Watch(ctx)
	if cleanup != nil {
		g.OnStop(cleanup)
	}
	return ctx, g.Close
}

// published is the error of a command whose output publish refused, or
// that failed once its guard's context (ctx) was done — a stop signal
// cancels it before it removes the output, so what fails then fails for
// the interruption: the interruption, or an existing destination (named
// by what the user gives, e.g. "--out"), said the CLI's way; else err.
func published(ctx context.Context, err error, command, dest, given string) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil, errors.Is(err, publish.ErrInterrupted):
		return interrupted(command, dest)
	case errors.Is(err, publish.ErrExists):
		return usageErrorf("%s already exists; %s never overwrites (remove it or choose another %s)", dest, command, given)
	}
	return err
}

// interrupted is the error of a command a stop signal ended: nothing was
// written to its destination.
func interrupted(command, dest string) error {
	return fmt.Errorf("%s interrupted: nothing was written to %s", command, dest)
}

// pause is a test hook: a child process under test stops at point until
// ctx is cancelled by the parent's signal. A no-op outside tests.
func (a *App) pause(ctx context.Context, point string) {
	if a.pausePoint != nil {
		a.pausePoint(ctx, point)
	}
}

// pauseAtFirst wraps a progress callback so that the first report pauses
// at point (pause): where a command's temporary output exists. Outside
// tests it is progress itself.
func (a *App) pauseAtFirst(ctx context.Context, point string, progress func(done, total int64)) func(done, total int64) {
	if a.pausePoint == nil {
		return progress
	}
	paused := false
	return both(progress, func(int64, int64) {
		if !paused {
			paused = true
			a.pause(ctx, point)
		}
	})
}
