package store

import (
	"cmp"
	"slices"

	"github.com/patrdb/patrdb/model"
	bolt "go.etcd.io/bbolt"
)

// One API call writes to several buckets — a turn, its node's event, a
// frontier key — and bbolt walks down from a bucket's root for every Put.
// Alternating between buckets made each walk miss the CPU's caches:
// putting the same records into raw bbolt bucket by bucket instead of in
// that order took a fifth less CPU on ~1 KB turns and a third less on
// tiny ones (bench/RESULTS.md). So a write transaction queues the records
// of the buckets it appends to most — turns and events — and puts each
// bucket's queue in one ordered pass: before commit (Tx.flush), or as
// soon as anything reads that bucket (RunTx.bucket), so every read in the
// transaction still sees every write before it.

// queued are the puts waiting for one sub-bucket.
type queued struct {
	name string
	b    *bolt.Bucket
	puts []queuedPut
	// used is how many puts the queue has held at once in this
	// transaction: past it, puts holds no key or value (handOnQueues).
	used int
}

type queuedPut struct{ k, v []byte }

// put queues k, v for the queue's sub-bucket (see above); both must stay
// unmodified until the transaction ends, as for a Put.
func (q *queued) put(tx *Tx, k, v []byte) {
	tx.written += int64(len(k) + len(v))
	q.puts = append(q.puts, queuedPut{k, v})
}

// queue is the queue of sub-bucket name, b, made on first use. A writer
// that queues many puts at once (putTurns) finds it once for all.
func (r *RunTx) queue(name string, b *bolt.Bucket) *queued {
	for _, q := range r.queues {
		if q.b == b {
			return q
		}
	}
	q := &queued{name: name, b: b}
	if spare := &r.tx.db.queues; len(*spare) > 0 {
		q.puts = (*spare)[len(*spare)-1]
		*spare = (*spare)[:len(*spare)-1]
	}
	r.queues = append(r.queues, q)
	return q
}

// A step's worth of queued puts runs to thousands; growing a fresh queue
// to that size in every transaction took a twentieth of the API's CPU on
// ~1 KB turns (BenchmarkMatrixAPI). So an ended write transaction hands
// its queues, emptied, to the next one: at most maxSpareQueues of at most
// maxSpareQueueLen puts each (48 bytes a put).
const (
	maxSpareQueues   = 4
	maxSpareQueueLen = 1 << 14
)

// handOnQueues gives the transaction's queues to the DB's spares, their
// keys and values cleared (bbolt is done with them: Update calls it after
// Commit or Rollback, under writeMu).
func (tx *Tx) handOnQueues() {
	for _, r := range tx.runs {
		for _, q := range r.queues {
			if len(tx.db.queues) == maxSpareQueues {
				return
			}
			if cap(q.puts) <= maxSpareQueueLen {
				// Only what this transaction used: the transaction before
				// cleared the rest.
				clear(q.puts[:max(q.used, len(q.puts))])
				tx.db.queues = append(tx.db.queues, q.puts[:0])
			}
			q.puts = nil
		}
	}
}

// putQueued puts what waits for sub-bucket name (every bucket when name
// is ""), in the order it was queued.
func (r *RunTx) putQueued(name string) error {
	for _, q := range r.queues {
		if name != "" && q.name != name {
			continue
		}
		for _, p := range q.puts {
			if err := q.b.Put(p.k, p.v); err != nil {
				return r.tx.fail(err)
			}
		}
		q.used = max(q.used, len(q.puts))
		q.puts = q.puts[:0]
	}
	return nil
}

// A node added and retired in the same transaction — most of a step's
// nodes when a step commits at once — would put its frontier key and
// delete it again, two b-tree walks for nothing. So the frontier's changes
// wait in the transaction too, and only those that change the file are
// made, in key order: at flush, or when the frontier is read. What the
// file holds is kept on the node's dirty-set entry (dirtyNode.inFrontier),
// so a change is a flag and an append, not a map's lookup and store.

// queueFrontier records that d's node went into or out of the active
// status, and so maybe into or out of the frontier.
func (r *RunTx) queueFrontier(d *dirtyNode) {
	if !d.frontierQueued {
		d.frontierQueued = true
		r.frontier = append(r.frontier, d)
	}
}

// frontierPut is a change putFrontier makes: node id's key is put, or
// deleted.
type frontierPut struct {
	id  uint64
	put bool
}

// putFrontier makes the frontier's queued changes.
func (r *RunTx) putFrontier() error {
	if len(r.frontier) == 0 {
		return nil
	}
	b := r.subBucket(bFrontier)
	if b == nil {
		return r.missing(bFrontier)
	}
	todo := r.frontierTodo[:0]
	for _, d := range r.frontier {
		d.frontierQueued = false
		if now := d.n.Status == model.NodeActive; now != d.inFrontier {
			d.inFrontier = now
			todo = append(todo, frontierPut{d.n.ID, now})
		}
	}
	clear(r.frontier)
	r.frontier = r.frontier[:0]
	slices.SortFunc(todo, func(a, b frontierPut) int { return cmp.Compare(a.id, b.id) })
	r.frontierTodo = todo
	for _, c := range todo {
		var err error
		if c.put {
			err = r.tx.put(b, r.tx.putKey1(c.id), []byte{})
		} else {
			err = b.Delete(r.tx.putKey1(c.id))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// appendBucket is sub-bucket name for a writer that queues its puts (and
// reads only the bucket's sequence): unlike bucket, it leaves the queue
// as it is.
func (r *RunTx) appendBucket(name string) (*bolt.Bucket, error) {
	if b := r.subBucket(name); b != nil {
		return b, nil
	}
	return nil, r.missing(name)
}
