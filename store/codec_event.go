package store

import (
	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// The event record: an 8-element msgpack array — seq, time, kind, step,
// group, node, rubric, payload (bin; nil when none). Integers take their
// shortest form.
const eventFields = 8

// encodeEvent frames e's record (the bytes msgpack/v5 writes for it).
func encodeEvent(e *model.Event) []byte {
	b := make([]byte, headerLen, headerLen+eventHeadMax+len(e.Kind)+len(e.Payload))
	return frame(appendBin(appendEventHead(b, e), e.Payload))
}

// eventHeadMax bounds what appendEventHead writes besides the kind.
const eventHeadMax = 1 + 6*9 + 5

// appendEventHead appends e's record up to its payload, which follows as
// the last element.
func appendEventHead(b []byte, e *model.Event) []byte {
	b = appendArrayLen(b, eventFields)
	b = appendUint(b, e.Seq)
	b = appendInt(b, e.Time)
	b = appendStr(b, string(e.Kind))
	b = appendUint(b, e.Step)
	b = appendUint(b, e.Group)
	b = appendUint(b, e.Node)
	return appendUint(b, e.Rubric)
}

// decodeEvent is decodeValue for an event, without making e escape to the
// heap (an interface argument would): RunTx.Events decodes one per key.
// The payload is copied into payloads' chunks (nil: an allocation of its
// own).
func decodeEvent(bucket string, key, raw []byte, e *model.Event, payloads *payloadChunks) error {
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return err
	}
	if decodeEventMsgp(payload, e) {
		e.Payload = payloads.clone(e.Payload)
		return nil
	}
	*e = model.Event{}
	if !msgpackFits(payload) {
		return errLengthExceeds(bucket, key)
	}
	slow := new(model.Event)
	if err := msgpack.Unmarshal(payload, slow); err != nil {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "decode: " + err.Error()}
	}
	*e = *slow
	return nil
}

// decodeEventMsgp fills e from payload in canonical form, e.Payload
// aliasing payload: the caller copies it (payloadChunks.clone) before the
// transaction ends.
func decodeEventMsgp(payload []byte, e *model.Event) bool {
	m := msgpReader{b: payload}
	if m.arrayLen() != eventFields {
		return false
	}
	e.Seq = m.uint64()
	e.Time = m.int64()
	kind, _ := m.bytes()
	if k, ok := decodedKind(kind); ok {
		e.Kind = k
	} else {
		e.Kind = model.EventKind(kind)
	}
	e.Step = m.uint64()
	e.Group = m.uint64()
	e.Node = m.uint64()
	e.Rubric = m.uint64()
	if b, isNil := m.bytes(); !isNil {
		e.Payload = b
	}
	return m.err == nil
}

// payloadChunks copies event payloads into shared chunks: a replay
// decodes an event per key, and one allocation per payload was a third
// of its time. Each copy's capacity ends where it does, so appending to
// one never reaches the next; a copy kept keeps its whole chunk alive.
type payloadChunks struct{ free []byte }

const payloadChunk = 16 << 10

// clone copies b as msgpReader.bin does — nil stays nil, empty is empty
// and non-nil — into the chunks, or on its own when p is nil or b is
// large.
func (p *payloadChunks) clone(b []byte) []byte {
	switch {
	case b == nil:
		return nil
	case len(b) == 0:
		return []byte{}
	case p == nil || len(b) > payloadChunk/8:
		return append([]byte(nil), b...)
	}
	if cap(p.free)-len(p.free) < len(b) {
		p.free = make([]byte, 0, payloadChunk)
	}
	at := len(p.free)
	p.free = append(p.free, b...)
	return p.free[at:len(p.free):len(p.free)]
}
