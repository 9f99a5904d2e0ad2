package store

import (
	"encoding/binary"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// appendEvent writes e with the next sequence number. val is the framed
// value of the record the event is about; its payload becomes the event's.
func (r *RunTx) appendEvent(e model.Event, val []byte) error {
	if val == nil {
		return r.appendEventPayload(e, nil)
	}
	return r.appendEventPayload(e, val[headerLen:])
}

// appendEventPayload is appendEvent given the payload itself (msgpack,
// unframed; nil for none). The event's value holds a copy of it.
func (r *RunTx) appendEventPayload(e model.Event, payload []byte) error {
	var err error
	if payload == nil {
		_, err = r.putEvent(&e, 0, nil)
	} else {
		_, err = r.putEvent(&e, len(payload), func(b []byte) []byte { return append(b, payload...) })
	}
	return err
}

// putEvent writes e with the next sequence number and the time, its
// payload being what fill appends (about size bytes; nil fill: none),
// encoded straight into the value bbolt keeps: a node's record, the
// payload of most events, is encoded once per event, not once and then
// copied. It returns that value, which ends with the payload.
func (r *RunTx) putEvent(e *model.Event, size int, fill func([]byte) []byte) ([]byte, error) {
	q := r.events
	if q == nil {
		b, err := r.appendBucket(bEvents)
		if err != nil {
			return nil, err
		}
		q = r.queue(bEvents, b)
		r.events = q
	}
	seq, err := q.b.NextSequence()
	if err != nil {
		return nil, err
	}
	e.Seq = seq
	e.Time = r.tx.eventTime()
	val := appendEventHead(r.tx.vals.start(headerLen + eventHeadMax + len(e.Kind) + 5 + size)[:headerLen], e)
	if fill == nil {
		val = append(val, 0xc0)
	} else {
		val = appendBinOf(val, fill)
	}
	val = r.tx.vals.finish(frame(val))
	q.put(r.tx, r.tx.vals.finish(binary.BigEndian.AppendUint64(r.tx.vals.start(8), seq)), val)
	return val, nil
}

// AppendEvent records an event of a kind defined above the store (rubric
// judgements, admission figures, ...). Payload is any msgpack value the
// caller decodes itself. Returns the sequence number. The store's own
// kinds (EventKinds) are refused with ErrInvalid: the store writes each
// with the record it holds, and one written with another payload would be
// a log that no longer replays.
func (r *RunTx) AppendEvent(kind model.EventKind, step, group, node, rubric uint64, payload any) (uint64, error) {
	if err := r.tx.check(true); err != nil {
		return 0, err
	}
	if kind == "" {
		return 0, r.tx.fail(invalidf("event kind is empty"))
	}
	if recordOf(kind) != recNone {
		return 0, r.tx.fail(invalidf("event kind %q is the store's own: the store writes it with its record", kind))
	}
	return r.appendAnyEvent(kind, step, group, node, rubric, payload)
}

// appendAnyEvent is AppendEvent without the kind rule: for tests, through
// storetest.AppendRawEvent, that need a log the store would not write.
func (r *RunTx) appendAnyEvent(kind model.EventKind, step, group, node, rubric uint64, payload any) (uint64, error) {
	var val []byte
	if payload != nil {
		p, err := msgpack.Marshal(payload)
		if err != nil {
			return 0, r.tx.fail(invalidf("event payload: %v", err))
		}
		val = append(make([]byte, headerLen, headerLen+len(p)), p...)
	}
	if err := r.appendEvent(model.Event{Kind: kind, Step: step, Group: group, Node: node, Rubric: rubric}, val); err != nil {
		return 0, r.tx.fail(err)
	}
	return r.LastSeq(), nil
}

// LastSeq is the sequence number of the run's last event (0 when none).
// In checked mode (Tx.CheckReads) it is the events sequence as stored: a
// reader that prints it reads it from Summary (RunSummary.Events), which
// compares it with the last event first.
func (r *RunTx) LastSeq() uint64 {
	b, err := r.appendBucket(bEvents) // the sequence only: queued events need not be put
	if err != nil {
		return 0
	}
	return b.Sequence()
}

// Events calls fn for each event with Seq >= from, in order, decoding one
// at a time so memory stays flat. fn's error stops the walk and is returned.
// Each event's Payload is its own copy, but the payloads of successive
// events share allocations of 16 KiB: one kept keeps its neighbours'.
func (r *RunTx) Events(from uint64, fn func(model.Event) error) error {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return err
		}
		return p.Events(from, fn)
	}
	b, err := r.bucket(bEvents)
	if err != nil {
		return err
	}
	path := r.bpath(bEvents)
	var payloads payloadChunks
	c := b.Cursor()
	for k, v := c.Seek(u64key(from)); k != nil; k, v = c.Next() {
		var e model.Event
		if err := decodeEvent(path, k, v, &e, &payloads); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// DecodePayload decodes an event's payload into v: a *Node for node events,
// *Group for group events, *Rubric, *Advantage, *Checkpoint, *Run, or
// *TurnsPayload for EvTurns; for custom kinds whatever the writer stored.
func DecodePayload(e model.Event, v any) error {
	if decodeFast(e.Payload, v) { // a record with a hand-written decoder, in canonical form (codec_records.go)
		return nil
	}
	if !msgpackFits(e.Payload) {
		return &CorruptError{Bucket: "events", Key: u64key(e.Seq), Reason: "payload: a length exceeds the payload"}
	}
	if err := msgpack.Unmarshal(e.Payload, v); err != nil {
		return &CorruptError{Bucket: "events", Key: u64key(e.Seq), Reason: "payload: " + err.Error()}
	}
	return nil
}
