package server

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/patrdb/patrdb/store"
)

// Group commit. Every write is one job; concurrent jobs are committed
// together in one transaction (one fsync), which is what lets many rollout
// workers append turns at once without queueing behind each other's
// fsyncs. There is no timer: the first writer to arrive leads, runs every
// job waiting at that moment as one batch, and hands the lead to a waiting
// writer once its own job is done. A lone writer commits at once.
//
// The batch keeps the meaning of one transaction per request: jobs run in
// arrival order inside the transaction, each sees the writes of those before
// it, and a job that fails leaves the batch (its error goes to its caller)
// while the others run again without it, so a failed request writes
// nothing and does not fail anyone else's.

// maxBatch bounds one transaction; a larger backlog goes in several.
const maxBatch = 256

// job is one write request waiting for its commit.
type job struct {
	run, key, op string
	fp           []byte
	fn           writeOp

	status int
	body   []byte
	seq    uint64
	replay bool
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
	mu      sync.Mutex // guards pending and leading, never held across a transaction
	pending []*job
	leading bool
}

// submit queues j and returns when it has its answer.
func (s *server) submit(j *job) {
	b := &s.batch
	b.mu.Lock()
	b.pending = append(b.pending, j)
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
		n := min(len(b.pending), maxBatch)
		batch := append([]*job(nil), b.pending[:n]...)
		b.pending = append(b.pending[:0:0], b.pending[n:]...)
		b.mu.Unlock()
		deferred := s.runBatch(batch)
		b.mu.Lock()
		b.pending = append(deferred, b.pending...)
	}
}

// runBatch answers replays, commits the rest in one transaction, and
// returns the jobs that must wait for the next batch (a second request with
// a key already in this batch: it is answered as a replay once the first
// has committed).
func (s *server) runBatch(batch []*job) (deferred []*job) {
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
			deferred = nil
		}
	}()
	var todo []*job
	type runKey struct{ run, key string }
	inBatch := map[runKey]bool{}
	for _, j := range batch {
		idx, err := s.replies.load(s.db, j.run)
		if err != nil {
			j.finish(err)
			continue
		}
		if seq, ok := idx[j.key]; ok {
			s.answerReplay(j, seq)
			continue
		}
		if k := (runKey{j.run, j.key}); inBatch[k] {
			deferred = append(deferred, j)
			continue
		} else {
			inBatch[k] = true
		}
		todo = append(todo, j)
	}
	for len(todo) > 0 {
		failed := -1
		err := s.db.Update(func(tx *store.Tx) error {
			for i, j := range todo {
				failed = i
				if err := s.safeApply(tx, j); err != nil {
					return err
				}
			}
			failed = -1
			return nil
		})
		switch {
		case err == nil:
			for _, j := range todo {
				idx := s.replies.runs[j.run]
				if idx == nil { // the run was created in this batch
					idx = map[string]uint64{}
					s.replies.runs[j.run] = idx
				}
				idx[j.key] = j.seq
				j.finish(nil)
			}
			return deferred
		case failed >= 0:
			todo[failed].finish(err)
			todo = append(todo[:failed:failed], todo[failed+1:]...)
		default: // the commit itself failed (disk full, closed): nobody's write is on disk
			for _, j := range todo {
				j.finish(err)
			}
			return deferred
		}
	}
	return deferred
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

// apply runs one job inside the batch's transaction and appends its reply.
func apply(tx *store.Tx, j *job) error {
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
	seq, err := rt.AppendEvent(KindReply, 0, 0, 0, 0, &replyRecord{Key: j.key, Op: j.op, Fingerprint: j.fp, Status: st, Body: body})
	if err != nil {
		return err
	}
	j.status, j.body, j.seq = st, body, seq
	return nil
}

// answerReplay answers a repeated request with the stored first answer, or
// 409 if the key was used for a different request.
func (s *server) answerReplay(j *job, seq uint64) {
	rr, err := readReply(s.db, j.run, seq)
	if err != nil {
		j.finish(err)
		return
	}
	if rr.Op != j.op || !bytes.Equal(rr.Fingerprint, j.fp) {
		j.finish(conflict("client_key %q was used for a different request (%s); use a new key for a new request", j.key, rr.Op))
		return
	}
	j.status, j.body, j.replay = rr.Status, rr.Body, true
	j.finish(nil)
}
