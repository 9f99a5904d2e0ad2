package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"

	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// Replies: the first answer to each keyed write. A server that takes
// writes from other processes keeps, in the same transaction as a write,
// the answer it gave, under the client's key for the request; a retry with
// that key gets the answer back instead of writing again. The answer is an
// event of the run's log (EvReply, its payload the Reply), so the log
// stays the whole record of the run (LoadRun and the lake carry replies
// like any event), and a nested bucket of the run indexes it by key:
//
//	replies/<key>  the sequence number of its EvReply event (u64 BE)
//
// so a look-up is two point reads however long the log. A run written
// before the index existed has no such bucket: the first write
// transaction that looks a key up or records a reply builds it from the
// log, once; a read-only look-up in such a run walks the log.

const bReplies = "replies"

// MaxReplyKey bounds a reply's key, which is stored twice (in the index
// and the event).
const MaxReplyKey = 1024

// Reply is the answer a write request was given: its operation (e.g.
// "POST /api/v1/runs/{run}/groups"), a fingerprint of the request the
// caller compares a retry with, the status and the body (JSON, or empty).
type Reply struct {
	_msgpack    struct{}        `msgpack:",as_array"`
	Key         string          `json:"client_key"`
	Op          string          `json:"op"`
	Fingerprint []byte          `json:"-"`
	Status      int             `json:"status"`
	Body        json.RawMessage `json:"body"`
}

// PutReply records rep as the answer to rep.Key, in the run's log and its
// reply index, and returns the event's sequence number. Call it in the
// transaction of the write it answers, so neither is ever on disk without
// the other. A key answered already is ErrExists; an empty key, or one
// over MaxReplyKey bytes, is ErrInvalid.
func (r *RunTx) PutReply(rep Reply) (uint64, error) {
	if err := r.tx.check(true); err != nil {
		return 0, err
	}
	if rep.Key == "" || len(rep.Key) > MaxReplyKey {
		return 0, r.tx.fail(invalidf("reply key of %d bytes: want 1 to %d", len(rep.Key), MaxReplyKey))
	}
	if len(rep.Body) > 0 && !json.Valid(rep.Body) {
		return 0, r.tx.fail(invalidf("reply to key %q: the body is not JSON", rep.Key))
	}
	idx, err := r.replyIndex()
	if err != nil {
		return 0, r.tx.fail(err)
	}
	if idx.Get([]byte(rep.Key)) != nil {
		return 0, r.tx.fail(existsf("a reply to key %q", rep.Key))
	}
	p, err := msgpack.Marshal(&rep)
	if err != nil {
		return 0, r.tx.fail(invalidf("reply: %v", err))
	}
	val := append(make([]byte, headerLen, headerLen+len(p)), p...)
	if err := r.appendEvent(model.Event{Kind: model.EvReply}, val); err != nil {
		return 0, r.tx.fail(err)
	}
	seq := r.LastSeq()
	return seq, r.tx.fail(idx.Put([]byte(rep.Key), u64key(seq)))
}

// Reply returns the reply recorded under key, or ErrNotFound.
func (r *RunTx) Reply(key string) (Reply, error) {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return Reply{}, err
		}
		return p.Reply(key)
	}
	if err := r.tx.check(false); err != nil {
		return Reply{}, err
	}
	idx := r.b.Bucket([]byte(bReplies))
	if idx == nil && !r.tx.Writable() {
		return r.scanReply(key)
	}
	if idx == nil {
		var err error
		if idx, err = r.replyIndex(); err != nil {
			return Reply{}, r.tx.fail(err)
		}
	}
	var v []byte
	if key != "" {
		v = idx.Get([]byte(key))
	}
	if v == nil {
		return Reply{}, notFoundf("no reply to key %q in run %q", key, r.id)
	}
	if len(v) != 8 {
		return Reply{}, &CorruptError{Bucket: r.bpath(bReplies), Key: []byte(key), Reason: "value is not an 8-byte sequence number"}
	}
	rep, err := r.replyAt(keyU64(v, 0))
	if err == nil && rep.Key != key {
		err = &CorruptError{Bucket: r.bpath(bReplies), Key: []byte(key), Reason: "the event it names answers another key"}
	}
	return rep, err
}

// replyAt reads the reply event at seq.
func (r *RunTx) replyAt(seq uint64) (Reply, error) {
	b, err := r.bucket(bEvents)
	if err != nil {
		return Reply{}, err
	}
	raw := b.Get(u64key(seq))
	if raw == nil {
		return Reply{}, &CorruptError{Bucket: r.bpath(bReplies), Reason: fmt.Sprintf("a key names event %d, which is missing", seq)}
	}
	var e model.Event
	if err := decodeEvent(r.bpath(bEvents), u64key(seq), raw, &e, nil); err != nil {
		return Reply{}, err
	}
	if e.Kind != model.EvReply {
		return Reply{}, &CorruptError{Bucket: r.bpath(bReplies), Reason: fmt.Sprintf("a key names event %d, a %s event", seq, e.Kind)}
	}
	var rep Reply
	return rep, DecodePayload(e, &rep)
}

// scanReply finds key's reply by walking the log: a read-only look-up in a
// run without the index.
func (r *RunTx) scanReply(key string) (rep Reply, err error) {
	found := false
	err = r.eachReply(func(_ uint64, x *Reply) error {
		if x.Key == key {
			rep, found = *x, true
			return errStopReplies
		}
		return nil
	})
	if err == errStopReplies {
		err = nil
	}
	if err == nil && !found {
		err = notFoundf("no reply to key %q in run %q", key, r.id)
	}
	return rep, err
}

var errStopReplies = errors.New("stop")

// eachReply calls fn with every reply event of the log, in order.
func (r *RunTx) eachReply(fn func(seq uint64, rep *Reply) error) error {
	return r.Events(1, func(e model.Event) error {
		if e.Kind != model.EvReply {
			return nil
		}
		var rep Reply
		if err := DecodePayload(e, &rep); err != nil {
			return err
		}
		return fn(e.Seq, &rep)
	})
}

// replyIndex returns the run's reply index in a write transaction,
// building it from the log when the run has none.
func (r *RunTx) replyIndex() (*bolt.Bucket, error) {
	if b := r.b.Bucket([]byte(bReplies)); b != nil {
		return b, nil
	}
	b, err := r.b.CreateBucket([]byte(bReplies))
	if err != nil {
		return nil, err
	}
	n := 0
	err = r.eachReply(func(seq uint64, rep *Reply) error {
		if b.Get([]byte(rep.Key)) != nil {
			return nil // the first answer is the one a retry gets
		}
		n++
		return b.Put([]byte(rep.Key), u64key(seq))
	})
	if err != nil {
		return nil, err
	}
	if n > 0 {
		r.tx.db.log.Info("patrdb: indexed the run's replies from its log", "run", r.id, "replies", n)
	}
	return b, nil
}

// dropReply removes the index entry of reply event e (at seq) as
// DropSteps deletes the event.
func (r *RunTx) dropReply(seq uint64, e model.Event) error {
	idx := r.b.Bucket([]byte(bReplies))
	if idx == nil {
		return nil
	}
	var rep Reply
	if err := DecodePayload(e, &rep); err != nil {
		return err
	}
	if v := idx.Get([]byte(rep.Key)); bytes.Equal(v, u64key(seq)) {
		return idx.Delete([]byte(rep.Key))
	}
	return nil
}
