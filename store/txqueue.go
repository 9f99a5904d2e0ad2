package store

import bolt "go.etcd.io/bbolt"

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
}

type queuedPut struct{ k, v []byte }

// queuePut puts k, v into sub-bucket name later (see above). k is copied
// (callers pass the transaction's scratch key); v must stay unmodified
// until the transaction ends, as for a Put.
func (r *RunTx) queuePut(name string, b *bolt.Bucket, k, v []byte) {
	r.tx.written += int64(len(k) + len(v))
	k = r.tx.vals.finish(append(r.tx.vals.start(len(k)), k...))
	for _, q := range r.queues {
		if q.name == name {
			q.puts = append(q.puts, queuedPut{k, v})
			return
		}
	}
	r.queues = append(r.queues, &queued{name: name, b: b, puts: []queuedPut{{k, v}}})
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
		q.puts = q.puts[:0]
	}
	return nil
}

// appendBucket is sub-bucket name for a writer that queues its puts (and
// reads only the bucket's sequence): unlike bucket, it leaves the queue
// as it is.
func (r *RunTx) appendBucket(name string) (*bolt.Bucket, error) {
	if b := r.sub[name]; b != nil {
		return b, nil
	}
	return nil, r.missing(name)
}
