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
	done   chan struct{}
	closed sync.Once
}

// Watch catches the stop signals until Close, and returns the guard and a
// context that the first signal cancels, after the guard has removed
// every output it began and not yet published and run the functions
// given to OnStop.
func Watch(ctx context.Context) (*Guard, context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	g := &Guard{pending: map[*Output]struct{}{}, cancel: cancel, sigs: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(g.sigs, stopSignals()...)
	go func() {
		select {
		case <-g.sigs:
			signal.Stop(g.sigs) // the next signal has its default effect
			g.stop()
		case <-g.done:
		}
	}()
	return g, ctx
}

// stop removes the unpublished outputs, runs the OnStop functions and
// cancels the context.
func (g *Guard) stop() {
	g.mu.Lock()
	g.stopped = true
	for o := range g.pending {
		o.remove()
	}
	clear(g.pending)
	fns := g.onStop
	g.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	g.cancel()
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

// Close stops catching the signals (the next one has its default effect)
// and releases the context. Outputs not yet published stay as they are:
// their owner aborts them.
func (g *Guard) Close() {
	g.closed.Do(func() {
		close(g.done)
		signal.Stop(g.sigs)
		g.cancel()
	})
}
