package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A run's ids come from its buckets' sequences (doc.go): a new event takes
// the events bucket's next number, a new node the nodes bucket's, and so
// on. A sequence that fell behind its records — a damaged bucket header
// — would hand out the id of a record that exists, and the write would
// overwrite it: event 1, say, replaced while Update returns nil. So a
// write transaction compares each sequence with the last record of its
// bucket when it first binds a run, and refuses the run (ErrCorrupt, and
// the transaction does not commit) when they disagree; and the readers
// that print the event count (a run's summary, in checked mode too) check
// it the same way first. A write transaction whose snapshot is its
// handle's own last commit, which bound the run, skips the comparison:
// the sequences are the ones that commit wrote (txcarry.go).

// sequenced are the buckets whose sequence hands out a run's ids.
var sequenced = [...]string{bEvents, bNodes, bTurns, bRubrics, bGroups}

// checkSequences compares every id sequence of the run with its records.
func (r *RunTx) checkSequences() error {
	for _, name := range sequenced {
		if name == bTurns && r.legacyTurns() {
			continue // keyed node|index, no sequence (and never written)
		}
		if err := r.checkSequence(name); err != nil {
			return err
		}
	}
	return nil
}

// checkSequence compares bucket name's sequence with the largest id among
// its records: the last event must be the sequence itself (the log
// continues at the next number); any other record's id must not exceed it.
// A missing bucket is not its concern (the handle's reads report it). The
// pages read (the bucket's last root-to-leaf path; for groups, the group
// index's) are trusted, as a writer trusts its file; a reader walks them
// with bounds first.
func (r *RunTx) checkSequence(name string) error {
	b := r.subBucket(name)
	if b == nil {
		return nil
	}
	seq := b.Sequence()
	top, ok := lastID(r, name, b)
	switch {
	case !ok:
		return nil
	case name == bEvents && top != seq:
		return &CorruptError{Bucket: r.bpath(name), Reason: fmt.Sprintf("the last event is %d but the sequence is at %d (the next event must be %d)", top, seq, top+1)}
	case top > seq:
		return &CorruptError{Bucket: r.bpath(name), Reason: fmt.Sprintf("the sequence %d is below id %d (a new record would take an id in use)", seq, top)}
	}
	return nil
}

// lastID is the largest id among bucket name's records (ok false when it
// has none, or its last key is not an id key). Groups are keyed
// step|group, so their largest id is the group index's last key
// (group|step), or, in a run written before the index, the largest of
// every group key.
func lastID(r *RunTx, name string, b *bolt.Bucket) (id uint64, ok bool) {
	if name != bGroups {
		k, _ := b.Cursor().Last()
		if len(k) < 8 {
			return 0, false
		}
		return keyU64(k, 0), true
	}
	if ids := r.b.Bucket([]byte(bGroupIDs)); ids != nil {
		k, _ := ids.Cursor().Last()
		if len(k) != 16 {
			return 0, false
		}
		return keyU64(k, 0), true
	}
	_ = b.ForEach(func(k, _ []byte) error {
		if len(k) == 16 {
			id, ok = max(id, keyU64(k, 1)), true
		}
		return nil
	})
	return id, ok
}
