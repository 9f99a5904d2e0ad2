package publish

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// stopSignals are the signals that stop a command which writes output:
// Ctrl-C, a service manager's stop, a closed terminal.
func stopSignals() []os.Signal { return []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} }

// Guard removes a command's unpublished outputs when a stop signal
// arrives. Make one with Watch; Close it when the command ends.
type Guard struct {
	mu      sync.Mutex
	pending map[*Output]struct{}
	onStop  []func()
	stopped bool

	cancel context.CancelFunc
	sigs   chan os.Signal
	done   chan struct{} // closed by Close
	exited chan struct{} // closed when the watching goroutine has returned
	closed sync.Once
}

// Watch catches the stop signals until Close, and returns the guard and a
// context that the first signal cancels; the guard then removes every
// output it began and has not published and runs the functions given to
// OnStop. The context is cancelled first, so whatever the command sees
// fail once its output is gone, it sees the context done too; and Close
// waits for the removal, so the command cannot end before it.
func Watch(ctx context.Context) (*Guard, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	g := &Guard{pending: map[*Output]struct{}{}, cancel: cancel,
		sigs: make(chan os.Signal, 1), done: make(chan struct{}), exited: make(chan struct{})}
	signal.Notify(g.sigs, stopSignals()...)
	go func() {
		defer close(g.exited)
		select {
		case <-g.sigs:
			signal.Stop(g.sigs) // the next signal has its default effect
			g.stop()
		case <-g.done:
		}
	}()
	return g, ctx
}

// stop cancels the context, then removes the unpublished outputs and runs
// the OnStop functions.
func (g *Guard) stop() {
	g.mu.Lock()
	g.stopped = true
	g.cancel()
	for o := range g.pending {
		o.remove()
	}
	clear(g.pending)
	fns := g.onStop
	g.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// Begin is Begin for an output the guard removes on a stop signal. After
// a signal it is ErrInterrupted.
func (g *Guard) Begin(dest string) (*Output, error) {
	o, err := begin(g, dest)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		o.remove()
		return nil, ErrInterrupted
	}
	g.pending[o] = struct{}{}
	return o, nil
}

// OnStop adds fn to what a stop signal runs (for temporary output the
// guard did not begin, such as a library's own).
func (g *Guard) OnStop(fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.onStop = append(g.onStop, fn)
}

// Stopped reports whether a stop signal has arrived.
func (g *Guard) Stopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}

// Close waits for the removal a stop signal began, if one did, then stops
// catching the signals (the next one has its default effect) and releases
// the context. Outputs not yet published stay as they are: their owner
// aborts them. Not to be called from an OnStop function.
func (g *Guard) Close() {
	g.closed.Do(func() {
		close(g.done)
		<-g.exited
		signal.Stop(g.sigs)
		g.cancel()
	})
}
