package store

import "unsafe"

// A write transaction hands bbolt thousands of small values (an event for
// every change, a record for every turn), and bbolt keeps each until the
// commit. Allocating them one by one was a large part of an append's CPU,
// so they are carved from a few chunks that live as long as the
// transaction. Values larger than an eighth of a chunk get their own
// allocation: a chunk then wastes at most that much at its end. Chunks
// double from minValueChunk, so that a transaction of a few changes
// allocates little.
//
// When Commit (or Rollback) returns, bbolt has copied every value into its
// pages or dropped it, and nothing of the store keeps one (records are
// decoded copies), so Update hands the full-size chunks of a transaction
// to the next one instead of to the garbage collector. Without that, every
// commit allocated its whole size again, and the collections it set off
// cost a store's second ~1 KB step commit a fifth of its CPU (BenchmarkMatrixCPU).
// A DB keeps at most maxSpareChunks (4 MiB).
const (
	valueChunk     = 32 << 10
	minValueChunk  = 1 << 10
	maxSpareChunks = 128
)

// valueArena holds the unused tail of the current chunk (length 0), the
// size of the last chunk, the full-size chunks it holds (to hand on) and
// where the DB keeps its spare ones (nil: the transaction neither takes
// nor gives any).
type valueArena struct {
	free  []byte
	chunk int
	held  [][]byte
	spare *[][]byte
}

// start returns an empty buffer with room for at least n bytes. The value
// is appended to it and handed to finish before the next start (one value
// at a time: until then the room is not taken); a value that outgrows the
// room moves to the heap by itself (append), which is correct, only
// slower.
func (a *valueArena) start(n int) []byte {
	if n > valueChunk/8 {
		return make([]byte, 0, n)
	}
	if cap(a.free) < n {
		a.free = a.newChunk(n)
	}
	return a.free
}

// newChunk is an empty chunk with room for n bytes: a spare one when the
// DB has one, else the next size up.
func (a *valueArena) newChunk(n int) []byte {
	if a.spare != nil && len(*a.spare) > 0 {
		last := len(*a.spare) - 1
		c := (*a.spare)[last]
		(*a.spare)[last] = nil
		*a.spare = (*a.spare)[:last]
		a.chunk = valueChunk
		a.held = append(a.held, c)
		return c
	}
	a.chunk = min(max(2*a.chunk, minValueChunk), valueChunk)
	c := make([]byte, 0, max(a.chunk, n))
	if a.spare != nil && cap(c) == valueChunk {
		a.held = append(a.held, c)
	}
	return c
}

// handOn gives the arena's full-size chunks to the DB's spares. Only
// once the transaction has ended: bbolt holds none of its values then.
func (a *valueArena) handOn() {
	if a.spare != nil {
		for _, c := range a.held {
			if len(*a.spare) == maxSpareChunks {
				break
			}
			*a.spare = append(*a.spare, c[:0])
		}
	}
	a.held, a.free = nil, nil
}

// finish takes v, built from start's buffer, out of the free tail when it
// is still there, and clips its capacity: nothing appended to a value can
// reach the next one.
func (a *valueArena) finish(v []byte) []byte {
	if len(v) > 0 && unsafe.SliceData(v) == unsafe.SliceData(a.free) {
		a.free = a.free[len(v):len(v)]
	}
	return v[:len(v):len(v)]
}

// value frames a record into the transaction's chunks: fill appends its
// payload, about size bytes.
func (tx *Tx) value(size int, fill func([]byte) []byte) []byte {
	return tx.vals.finish(frame(fill(tx.vals.start(headerLen + size)[:headerLen])))
}
