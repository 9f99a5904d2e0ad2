package store

import (
	"bytes"

	"github.com/patrdb/patrdb/model"
)

// The reply index (reply.go) against the log: every entry names, by a
// sequence number past what DropSteps deleted, an EvReply event that
// answers its key, and every EvReply event in the log is the entry of its
// key. A run without the index (written before it) has nothing to check.

// replies checks the index's entries.
func (c *checker) replies(r *RunTx, droppedSeq uint64) {
	idx := r.b.Bucket([]byte(bReplies))
	if idx == nil {
		return
	}
	path := r.bpath(bReplies)
	_ = idx.ForEach(func(k, v []byte) error {
		switch {
		case v == nil:
			c.inv(path, cloneBytes(k), "a nested bucket, not a reply's entry")
		case len(v) != 8:
			c.inv(path, cloneBytes(k), "value is not an 8-byte sequence number")
		case keyU64(v, 0) <= droppedSeq:
			c.inv(path, cloneBytes(k), "names event %d, which the run dropped", keyU64(v, 0))
		default:
			rep, err := r.replyAt(keyU64(v, 0))
			switch {
			case err != nil:
				c.inv(path, cloneBytes(k), "names event %d: %v", keyU64(v, 0), err)
			case rep.Key != string(k):
				c.inv(path, cloneBytes(k), "names event %d, the reply to key %q", keyU64(v, 0), rep.Key)
			}
		}
		return nil
	})
}

// replyLogged checks that reply event e is its key's entry in the index.
func (c *checker) replyLogged(r *RunTx, e *model.Event) {
	idx := r.b.Bucket([]byte(bReplies))
	if idx == nil {
		return
	}
	var rep Reply
	if err := DecodePayload(*e, &rep); err != nil {
		c.inv(r.bpath(bEvents), u64key(e.Seq), "reply payload does not decode: %v", err)
		return
	}
	if v := idx.Get([]byte(rep.Key)); !bytes.Equal(v, u64key(e.Seq)) {
		c.inv(r.bpath(bReplies), []byte(rep.Key), "event %d answers this key, but the index does not name it", e.Seq)
	}
}
