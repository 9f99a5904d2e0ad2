package store

import "github.com/vmihailenco/msgpack/v5"

// The event record: an 8-element msgpack array — seq, time, kind, step,
// group, node, rubric, payload (bin; nil when none). Integers take their
// shortest form.
const eventFields = 8

// encodeEvent frames e's record (the bytes msgpack/v5 writes for it).
func encodeEvent(e *Event) []byte {
	b := make([]byte, headerLen, headerLen+eventHeadMax+len(e.Kind)+len(e.Payload))
	return frame(appendBin(appendEventHead(b, e), e.Payload))
}

// eventHeadMax bounds what appendEventHead writes besides the kind.
const eventHeadMax = 1 + 6*9 + 5

// appendEventHead appends e's record up to its payload, which follows as
// the last element.
func appendEventHead(b []byte, e *Event) []byte {
	b = appendArrayLen(b, eventFields)
	b = appendUint(b, e.Seq)
	b = appendInt(b, e.Time)
	b = appendStr(b, string(e.Kind))
	b = appendUint(b, e.Step)
	b = appendUint(b, e.Group)
	b = appendUint(b, e.Node)
	return appendUint(b, e.Rubric)
}

// storeEventKinds interns the kinds the store writes, so decoding one
// allocates no string. A kind missing here still decodes (into a fresh
// string).
var storeEventKinds = func() map[string]EventKind {
	m := map[string]EventKind{}
	for _, k := range []EventKind{EvRunCreate, EvRunStatus, EvGroupOpen, EvGroupUpdate, EvGroupClose,
		EvNodeAdd, EvTurns, EvNodeScore, EvNodeRoute, EvNodeStatus, EvNodeReward, EvNodeEnvState,
		EvAdvantage, EvRubricPut, EvRubricUpdate, EvRubricMove, EvCheckpoint} {
		m[string(k)] = k
	}
	return m
}()

// decodeEvent is decodeValue for an event, without making e escape to the
// heap (an interface argument would): RunTx.Events decodes one per key.
func decodeEvent(bucket string, key, raw []byte, e *Event) error {
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return err
	}
	if decodeEventMsgp(payload, e) {
		return nil
	}
	*e = Event{}
	if !msgpackFits(payload) {
		return errLengthExceeds(bucket, key)
	}
	slow := new(Event)
	if err := msgpack.Unmarshal(payload, slow); err != nil {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "decode: " + err.Error()}
	}
	*e = *slow
	return nil
}

func decodeEventMsgp(payload []byte, e *Event) bool {
	m := msgpReader{b: payload}
	if m.arrayLen() != eventFields {
		return false
	}
	e.Seq = m.uint64()
	e.Time = m.int64()
	kind, _ := m.bytes()
	if k, ok := storeEventKinds[string(kind)]; ok {
		e.Kind = k
	} else {
		e.Kind = EventKind(kind)
	}
	e.Step = m.uint64()
	e.Group = m.uint64()
	e.Node = m.uint64()
	e.Rubric = m.uint64()
	e.Payload = m.bin()
	return m.err == nil
}
