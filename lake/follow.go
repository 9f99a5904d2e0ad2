package lake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/patrdb/patrdb/store"
)

// FollowOptions configure Follow. The zero value follows every run of the
// file, looks for new checkpoints every second and keeps every step.
type FollowOptions struct {
	// Runs are the runs to follow; nil: every run of the file, those
	// created later too.
	Runs []string
	// KeepSteps, when not 0, drops from the file each step once it is in
	// the lake and older than the run's last KeepSteps checkpointed steps
	// (Retain), so the file stops growing.
	KeepSteps uint64
	// Interval is how often the file is looked at for new events; 0 means
	// DefaultFollowInterval.
	Interval time.Duration
	// Logger gets a warning for each export or drop that fails (it is
	// tried again at the next look) and each run another process exports;
	// nil: slog.Default().
	Logger *slog.Logger
	// OnExport, when not nil, is called after each export of a run that
	// added files, and OnRetain after each drop that dropped steps, on the
	// follower's goroutine.
	OnExport func(*ExportResult)
	OnRetain func(*RetainResult)
}

// DefaultFollowInterval is FollowOptions.Interval's default.
const DefaultFollowInterval = time.Second

// Follower exports the runs of a live file into a lake as they are
// checkpointed (Lake.Follow).
type Follower struct {
	l    *Lake
	db   *store.DB
	opts FollowOptions
	log  *slog.Logger

	mu     sync.Mutex // one pass at a time
	runs   map[string]*followed
	stop   context.CancelFunc
	done   chan struct{}
	closed bool
}

// followed is one run the follower exports.
type followed struct {
	hold    lease
	lastSeq uint64 // the file's last event at the last export
	warned  bool   // another process holds it: said once
	failed  bool   // the last pass failed: tried again at once
}

// Follow exports the runs of db into the lake as they grow, from the
// event log, while writers go on: every Interval it looks at each run's
// log, and exports (Export) what is new, so each step joins the lake as
// soon as the run has checkpointed it; with KeepSteps it then drops from
// the file the steps the lake holds (Retain). It holds each run's lease
// in the lake for as long as it runs: another exporter of the same run is
// refused meanwhile. Close stops it after a last export.
//
// A Go trainer that owns its store calls it beside its own writes;
// patrdb serve --lake does for the file it serves.
func (l *Lake) Follow(db *store.DB, opts FollowOptions) (*Follower, error) {
	if opts.Interval < 0 {
		return nil, fmt.Errorf("%w: interval %v", ErrOptions, opts.Interval)
	}
	if opts.Interval == 0 {
		opts.Interval = DefaultFollowInterval
	}
	f := &Follower{l: l, db: db, opts: opts, log: opts.Logger, runs: map[string]*followed{}, done: make(chan struct{})}
	if f.log == nil {
		f.log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	go f.loop(ctx)
	return f, nil
}

func (f *Follower) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		_ = f.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sync exports (and drops, with KeepSteps) what is new in every followed
// run now, and returns the first error.
func (f *Follower) Sync(ctx context.Context) error { return f.pass(ctx) }

// Close stops following after a last export, and gives back the runs'
// leases. It returns the last export's first error.
func (f *Follower) Close() error {
	f.stop()
	<-f.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := f.pass(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, r := range f.runs {
		if r.hold != nil {
			r.hold.release()
		}
	}
	return err
}

// pass looks at every run once.
func (f *Follower) pass(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return store.ErrClosed
	}
	ids := f.opts.Runs
	last := map[string]uint64{}
	err := f.db.View(func(tx *store.Tx) error {
		if ids == nil {
			var err error
			if ids, err = tx.RunIDs(); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if r, err := tx.Run(id); err == nil {
				last[id] = r.LastSeq()
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var first error
	for _, id := range ids {
		seq, ok := last[id]
		if !ok {
			continue // not created yet
		}
		if err := f.follow(ctx, id, seq); err != nil {
			if first == nil {
				first = err
			}
			if !errors.Is(err, context.Canceled) {
				f.log.Warn("patrdb: exporting into the lake", "run", id, "lake", f.l.String(), "err", err)
			}
		}
	}
	return first
}

// follow exports one run if its log moved since the last export.
func (f *Follower) follow(ctx context.Context, id string, seq uint64) error {
	r := f.runs[id]
	if r == nil {
		r = &followed{}
		f.runs[id] = r
	}
	if r.hold != nil && !r.failed && seq == r.lastSeq {
		return nil
	}
	if r.hold == nil {
		hold, err := f.l.obj.lock(ctx, id)
		var busy *BusyError
		if errors.As(err, &busy) {
			if !r.warned {
				r.warned = true
				f.log.Warn("patrdb: another process exports this run into the lake; not following it", "run", id, "lake", f.l.String(), "holder", busy.Holder)
			}
			return nil
		}
		if err != nil {
			return err
		}
		r.hold = hold
	}
	select {
	case <-r.hold.lost():
		r.hold = nil
		return &BusyError{Run: id}
	default:
	}
	r.failed = true
	res, err := f.l.export(ctx, f.db, id, id, ExportOptions{}, r.hold.lost())
	if err != nil {
		return err
	}
	if len(res.Files) > 0 && f.opts.OnExport != nil {
		f.opts.OnExport(res)
	}
	if f.opts.KeepSteps > 0 {
		m, err := f.l.Manifest(ctx, id)
		if err != nil {
			return err
		}
		rr, err := retain(ctx, f.db, id, m, f.opts.KeepSteps)
		if err != nil {
			return err
		}
		if rr.Dropped.Groups+rr.Dropped.Checkpoints > 0 && f.opts.OnRetain != nil {
			f.opts.OnRetain(rr)
		}
	}
	// What this pass exported is the log up to seq. A drop wrote an event
	// past it, and a writer may have written more since: the next look
	// sees the log moved and exports again (the drop's event once its step
	// is checkpointed). Reading the log's end here instead would take
	// events written meanwhile as exported — a run that ended then never
	// reached the lake.
	r.failed, r.lastSeq = false, seq
	return nil
}
