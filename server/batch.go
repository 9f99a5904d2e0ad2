package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Group commit. Every write is one job; concurrent jobs are committed
// together in one transaction (one fsync), which is what lets many rollout
// workers append turns at once without queueing behind each other's
// fsyncs. The first writer to arrive leads, runs every job waiting at that
// moment as one batch, and hands the lead to a waiting writer once its own
// job is done. A leader waits only for writes it knows are coming: the
// rollout workers' requests are announced (announced) while their bodies
// are read and decoded — most of a submit's time — and a leader holds its
// batch open for them, up to maxBatchDelay (bbolt's Batch waits out a
// timer whoever is coming; this waits for no one when no one is coming).
// A lone writer commits at once.
//
// The batch keeps the meaning of one transaction per request: jobs run in
// arrival order inside the transaction, each sees the writes of those before
// it, and a job that fails leaves the batch (its error goes to its caller)
// while the others run again without it, so a failed request writes
// nothing and does not fail anyone else's.

// maxBatch bounds one transaction; a larger backlog goes in several.
const maxBatch = 256

// maxBatchDelay bounds how long a leader holds its batch open for the
// announced writes still being decoded.
const maxBatchDelay = 2 * time.Millisecond

// errAnsweredOnly rolls back a batch whose every job was answered from a
// stored reply (or refused), so it commits nothing.
var errAnsweredOnly = errors.New("server: nothing to write")

// job is one write request waiting for its commit.
type job struct {
	run, key, op string
	fp           []byte
	fpBefore     func() ([]byte, error) // the fingerprint an older server stored, if it differs (replies.go)
	fn           writeOp
	arrival      *arrival // its announcement, if it was announced

	status int
	body   []byte
	replay bool
	wrote  bool // ran its op, whose writes and reply the batch commits
	err    error

	done chan struct{} // closed when the job has its answer
	lead chan struct{} // receives the lead when the previous leader leaves
}

func (j *job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

func (j *job) finish(err error) {
	if err != nil {
		j.err = err
	}
	close(j.done)
}

// batcher is the queue of jobs and who leads it.
type batcher struct {
	mu      sync.Mutex // guards pending, leading, coming and arrivals' done, never held across a transaction
	pending []*job
	leading bool
	coming  int           // announced writes not queued yet
	arrived chan struct{} // a write queued or withdrew its announcement (a leader may be waiting for it)
	delay   time.Duration // maxBatchDelay; tests set their own
}

func newBatcher() batcher {
	return batcher{arrived: make(chan struct{}, 1), delay: maxBatchDelay}
}

// arrival is one announced write.
type arrival struct{ done bool }

type arrivalKey struct{}

// announced is f with its request announced to the write batch until it
// queues its job (write) or returns without one.
func (s *server) announced(f apiFunc) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		a := s.batch.announce()
		defer s.batch.land(a)
		return f(w, r.WithContext(context.WithValue(r.Context(), arrivalKey{}, a)))
	}
}

func (b *batcher) announce() *arrival {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.coming++
	return &arrival{}
}

// land ends a's announcement, once.
func (b *batcher) land(a *arrival) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.landLocked(a)
}

func (b *batcher) landLocked(a *arrival) {
	if a == nil || a.done {
		return
	}
	a.done = true
	b.coming--
	select {
	case b.arrived <- struct{}{}:
	default:
	}
}

// gather holds the lead's next batch open while announced writes are on
// their way, up to b.delay; b.mu is held, and released while it waits.
func (b *batcher) gather() {
	if b.coming == 0 || len(b.pending) >= maxBatch {
		return
	}
	t := time.NewTimer(b.delay)
	defer t.Stop()
	for b.coming > 0 && len(b.pending) < maxBatch {
		b.mu.Unlock()
		select {
		case <-b.arrived:
			b.mu.Lock()
		case <-t.C:
			b.mu.Lock()
			return
		}
	}
}

// submit queues j and returns when it has its answer.
func (s *server) submit(j *job) {
	b := &s.batch
	b.mu.Lock()
	b.pending = append(b.pending, j)
	b.landLocked(j.arrival)
	if b.leading {
		b.mu.Unlock()
		select {
		case <-j.done:
			return
		case <-j.lead: // the previous leader handed over; j is still pending
		}
		b.mu.Lock()
	}
	b.leading = true
	for {
		select {
		case <-j.done:
			// Hand the lead to the oldest waiting job, or drop it.
			if len(b.pending) > 0 {
				b.pending[0].lead <- struct{}{}
			} else {
				b.leading = false
			}
			b.mu.Unlock()
			return
		default:
		}
		b.gather()
		n := min(len(b.pending), maxBatch)
		batch := append([]*job(nil), b.pending[:n]...)
		b.pending = append(b.pending[:0:0], b.pending[n:]...)
		b.mu.Unlock()
		s.runBatch(batch)
		b.mu.Lock()
	}
}

// runBatch commits the batch in one transaction, each job answered from
// its key's stored reply or by running it (apply). A job that fails leaves
// the batch and the rest run again without it.
func (s *server) runBatch(batch []*job) {
	// A panic must not strand the queue: every job of the batch still
	// waiting gets an error, and the leader goes on (submit's loop).
	defer func() {
		if v := recover(); v != nil {
			s.opts.Logger.Error("server: panic in a write batch", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err := fmt.Errorf("server: internal error (logged by the server)")
			for _, j := range batch {
				if !j.finished() {
					j.finish(err)
				}
			}
		}
	}()
	todo := batch
	for len(todo) > 0 {
		failed := -1
		err := s.db.Update(func(tx *store.Tx) error {
			wrote := false
			for i, j := range todo {
				failed = i
				if err := s.safeApply(tx, j); err != nil {
					return err
				}
				wrote = wrote || j.wrote
			}
			failed = -1
			if !wrote {
				return errAnsweredOnly // the file stays byte for byte as it was
			}
			return nil
		})
		switch {
		case err == nil || err == errAnsweredOnly:
			if wrote := countWrote(todo); wrote > 0 {
				s.ops.prom.batch.Observe(float64(wrote))
			}
			for _, j := range todo {
				j.finish(nil)
			}
			return
		case failed >= 0:
			todo[failed].finish(err)
			todo = append(todo[:failed:failed], todo[failed+1:]...)
		default: // the commit itself failed (disk full, closed): nobody's write is on disk
			for _, j := range todo {
				j.finish(err)
			}
			return
		}
	}
}

// countWrote is how many of the jobs wrote (not a replay, not refused).
func countWrote(jobs []*job) int {
	n := 0
	for _, j := range jobs {
		if j.wrote {
			n++
		}
	}
	return n
}

// safeApply is apply with a handler panic turned into that job's error, so
// the job leaves the batch like any failed one and the rest commit.
func (s *server) safeApply(tx *store.Tx, j *job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			s.opts.Logger.Error("server: panic in a write", "op", j.op, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			err = fmt.Errorf("server: internal error (logged by the server)")
		}
	}()
	return apply(tx, j)
}

// sameRequest reports whether a reply stored for op with fingerprint fp
// answers the request j is.
func (j *job) sameRequest(op string, fp []byte) bool {
	if op != j.op {
		return false
	}
	if bytes.Equal(fp, j.fp) {
		return true
	}
	if j.fpBefore == nil {
		return false
	}
	before, err := j.fpBefore()
	return err == nil && bytes.Equal(fp, before)
}

// apply answers one job inside the batch's transaction: with the reply
// its key already has (a retry; the same key for another request is a
// 409, the job's answer, which fails nothing else), or by running it and
// storing its reply beside its writes.
func apply(tx *store.Tx, j *job) error {
	j.status, j.body, j.replay, j.wrote, j.err = 0, nil, false, false, nil
	if rt, err := tx.Run(j.run); err == nil {
		rep, err := rt.Reply(j.key)
		switch {
		case err == nil && !j.sameRequest(rep.Op, rep.Fingerprint):
			j.err = conflict("client_key %q was used for a different request (%s); use a new key for a new request", j.key, rep.Op)
			return nil
		case err == nil:
			j.status, j.body, j.replay = rep.Status, rep.Body, true
			return nil
		case !errors.Is(err, model.ErrNotFound):
			return err
		}
	} else if !errors.Is(err, model.ErrNotFound) {
		return err
	}
	st, v, err := j.fn(tx)
	if err != nil {
		return err
	}
	body, err := marshal(v)
	if err != nil {
		return err
	}
	rt, err := tx.Run(j.run)
	if err != nil {
		return err
	}
	if _, err := rt.PutReply(store.Reply{Key: j.key, Op: j.op, Fingerprint: j.fp, Status: st, Body: body}); err != nil {
		return err
	}
	j.status, j.body, j.wrote = st, body, true
	return nil
}
