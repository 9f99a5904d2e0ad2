package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// stopSignals are the signals that stop a command which writes output
// (export, compact): Ctrl-C, a service manager's stop, a closed terminal.
// The command catches them to remove its temporary output, so the
// destination is either complete or absent; a second one ends the process
// at once (the temporary output is already gone by then).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// onStop returns a context cancelled by the first stop signal; cleanup,
// when not nil, runs as soon as it arrives, from another goroutine. Call
// stop when the command ends.
func onStop(ctx context.Context, cleanup func()) (_ context.Context, stop func()) {
	ctx, stopNotify := signal.NotifyContext(ctx, stopSignals...)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			stopNotify() // the next signal gets the default: the process ends
			if cleanup != nil {
				cleanup()
			}
		case <-done:
		}
	}()
	return ctx, func() { close(done); stopNotify() }
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
