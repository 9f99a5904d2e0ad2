package store

import "github.com/patrdb/patrdb/model"

// Hand-written decoders for the records read by the million: events
// (RunTx.Events), nodes (the payload of every node event, and every
// node-cache miss), groups, the payload of every EvTurns event, and
// advantages (one per row of every training batch); their layouts are in
// the codec_*.go file of each. Each one parses only the canonical form the
// store writes — the record's as_array msgpack, every field present — and leaves
// every other input to msgpack/v5, which then decides exactly as it always
// did: the other shapes it accepts (nil, an empty array, a map of field
// names) and the error for damage. So the fast path changes no result, only
// the time (msgp_test.go checks it against msgpack/v5 on damaged and random
// bytes).

// decodeFast fills v from payload and reports true when v is a record with
// a hand-written decoder and payload is in canonical form; otherwise it
// leaves v untouched and reports false.
func decodeFast(payload []byte, v any) bool {
	switch p := v.(type) {
	case *model.Event:
		var e model.Event
		if p == nil || !decodeEventMsgp(payload, &e) {
			return false
		}
		e.Payload = (*payloadChunks)(nil).clone(e.Payload)
		*p = e
		return true
	case *model.Node:
		var n model.Node
		if p == nil || !decodeNodeMsgp(payload, &n) {
			return false
		}
		*p = n
		return true
	case *model.Group:
		var g model.Group
		if p == nil || !decodeGroupMsgp(payload, &g) {
			return false
		}
		*p = g
		return true
	case *model.Advantage:
		var a model.Advantage
		if p == nil || !decodeAdvantageMsgp(payload, &a) {
			return false
		}
		*p = a
		return true
	case *model.TurnsPayload:
		m := msgpReader{b: payload}
		fields := m.arrayLen()
		if p == nil || (fields != turnsPayloadFields && fields != turnsPayloadFieldsV3 && fields != turnsPayloadFieldsV2 && fields != turnsPayloadFieldsV1) {
			return false
		}
		tp := model.TurnsPayload{From: m.int(), Count: m.int(), Turns: m.int()}
		if fields >= turnsPayloadFieldsV2 {
			tp.MinVersion, tp.MaxVersion = m.uint64(), m.uint64()
		}
		if fields >= turnsPayloadFieldsV3 {
			tp.Seq = m.uint64()
		}
		if fields == turnsPayloadFields {
			tp.Oldest = m.uint64()
		}
		if m.err != nil {
			return false
		}
		*p = tp
		return true
	}
	return false
}

const (
	turnsPayloadFields   = 7 // format 4 appended the oldest version written
	turnsPayloadFieldsV3 = 6 // format 3 appended the turn sequence number
	turnsPayloadFieldsV2 = 5
	turnsPayloadFieldsV1 = 3
	advantageFields      = 13
)

// encodeAdvantage frames a's record (the bytes msgpack/v5 writes for it):
// a 13-element array — step, group, leaf, outcome, rubric score, lambda,
// total, mean, std, advantage, rubric ids, zero variance before and after
// shaping.
func encodeAdvantage(a *model.Advantage) []byte {
	return frame(appendAdvantageMsgp(make([]byte, headerLen, headerLen+advantageSize(a)), a))
}

// advantageSize bounds the size of a's record (its payload).
func advantageSize(a *model.Advantage) int { return 1 + 3*9 + 7*9 + 5 + 9*len(a.Rubrics) + 2 }

func appendAdvantageMsgp(b []byte, a *model.Advantage) []byte {
	b = appendArrayLen(b, advantageFields)
	b = appendUint(appendUint(appendUint(b, a.Step), a.Group), a.Leaf)
	for _, x := range [...]float64{a.Outcome, a.RubricScore, a.Lambda, a.Total, a.Mean, a.Std, a.Advantage} {
		b = appendFloat64(b, x)
	}
	b = appendUints(b, a.Rubrics)
	return appendBool(appendBool(b, a.ZeroVariance), a.ZeroVarianceAfter)
}

func decodeAdvantageMsgp(payload []byte, a *model.Advantage) bool {
	m := msgpReader{b: payload}
	if m.arrayLen() != advantageFields {
		return false
	}
	a.Step, a.Group, a.Leaf = m.uint64(), m.uint64(), m.uint64()
	a.Outcome, a.RubricScore, a.Lambda, a.Total = m.float64(), m.float64(), m.float64(), m.float64()
	a.Mean, a.Std, a.Advantage = m.float64(), m.float64(), m.float64()
	var ok bool
	if a.Rubrics, ok = decodeUints(&m); !ok {
		return false
	}
	a.ZeroVariance = m.bool()
	a.ZeroVarianceAfter = m.bool()
	return m.err == nil
}

// encodeTurnsPayload frames an EvTurns payload (the bytes msgpack/v5
// writes for it): from, count, turns, min and max policy version, turn
// sequence number.
func encodeTurnsPayload(p *model.TurnsPayload) []byte {
	return frame(appendTurnsPayloadMsgp(make([]byte, headerLen, headerLen+turnsPayloadMax), p))
}

// turnsPayloadMax bounds an EvTurns payload's size.
const turnsPayloadMax = 1 + 7*9

func appendTurnsPayloadMsgp(b []byte, p *model.TurnsPayload) []byte {
	b = appendArrayLen(b, turnsPayloadFields)
	b = appendInt(b, int64(p.From))
	b = appendInt(b, int64(p.Count))
	b = appendInt(b, int64(p.Turns))
	b = appendUint(b, p.MinVersion)
	b = appendUint(b, p.MaxVersion)
	b = appendUint(b, p.Seq)
	return appendUint(b, p.Oldest)
}
