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
const (
	valueChunk    = 32 << 10
	minValueChunk = 1 << 10
)

// valueArena holds the unused tail of the current chunk (length 0) and
// the size of the last chunk.
type valueArena struct {
	free  []byte
	chunk int
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
		a.chunk = min(max(2*a.chunk, minValueChunk), valueChunk)
		a.free = make([]byte, 0, max(a.chunk, n))
	}
	return a.free
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
