package store

import "github.com/patrdb/patrdb/model"

// Turns are the bulk of a file (hundreds of tokens each), so they skip
// reflection: a fixed msgpack array written and read field by field
// (msgp.go), token arrays as bin blobs of little-endian words. Format 1
// wrote 7 fields; format 2 adds the policy version as an eighth, and a
// 7-field turn reads as version 0.
const (
	turnFields   = 8
	turnFieldsV1 = 7
)

// turnSize is the exact length of t's framed value.
func turnSize(t *model.Turn) int {
	na, nl, no := 4*len(t.ActionTokens), 4*len(t.ActionLogprobs), 4*len(t.ObservationTokens)
	return headerLen + 1 +
		strHeaderLen(len(t.Action)) + len(t.Action) +
		binHeaderLen(na) + na + binHeaderLen(nl) + nl +
		strHeaderLen(len(t.Observation)) + len(t.Observation) +
		binHeaderLen(no) + no +
		9 + 1 + 9 // float64 reward, bool done, uint64 policy version
}

// encodeTurn frames t into one allocation of exactly its size: the token
// arrays are copied once, straight into the value bbolt will hold.
func encodeTurn(t *model.Turn) ([]byte, error) {
	return appendTurnValue(make([]byte, 0, turnSize(t)), t), nil
}

// appendTurnValue appends t's framed value to out, which is empty.
func appendTurnValue(out []byte, t *model.Turn) []byte {
	out = append(out, valueFormatV1, 0, 0, 0, 0)
	out = appendArrayLen(out, turnFields)
	out = appendStr(out, t.Action)
	out = model.AppendWords(appendBinHeader(out, 4*len(t.ActionTokens)), t.ActionTokens)
	out = model.AppendFloats(appendBinHeader(out, 4*len(t.ActionLogprobs)), t.ActionLogprobs)
	out = appendStr(out, t.Observation)
	out = model.AppendWords(appendBinHeader(out, 4*len(t.ObservationTokens)), t.ObservationTokens)
	out = appendFloat64(out, t.Reward)
	out = appendBool(out, t.Done)
	return frame(appendUint64(out, t.PolicyVersion))
}

// decodeTurn parses a framed turn straight from raw (which may be a page
// of the mmap): strings and token arrays are copied out once each. Bytes
// after the last field are ignored, as msgpack/v5 ignored them.
func decodeTurn(bucket string, key, raw []byte, t *model.Turn) error {
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return err
	}
	bad := func(what string, err error) error {
		if err != nil {
			what += ": " + err.Error()
		}
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "turn: " + what}
	}
	m := msgpReader{b: payload}
	fields := m.arrayLen()
	if m.err != nil || (fields != turnFields && fields != turnFieldsV1) {
		return bad("not a 7- or 8-field array", m.err)
	}
	var ok bool
	if t.Action = m.str(); m.err != nil {
		return bad("action", m.err)
	}
	blob, _ := m.bytes()
	if m.err != nil {
		return bad("action tokens", m.err)
	}
	if t.ActionTokens, ok = model.Words(blob); !ok {
		return bad("action tokens length not a multiple of 4", nil)
	}
	if blob, _ = m.bytes(); m.err != nil {
		return bad("action logprobs", m.err)
	}
	if t.ActionLogprobs, ok = model.Floats(blob); !ok {
		return bad("action logprobs length not a multiple of 4", nil)
	}
	if t.Observation = m.str(); m.err != nil {
		return bad("observation", m.err)
	}
	if blob, _ = m.bytes(); m.err != nil {
		return bad("observation tokens", m.err)
	}
	if t.ObservationTokens, ok = model.Words(blob); !ok {
		return bad("observation tokens length not a multiple of 4", nil)
	}
	if t.Reward = m.float64(); m.err != nil {
		return bad("reward", m.err)
	}
	if t.Done = m.bool(); m.err != nil {
		return bad("done", m.err)
	}
	t.PolicyVersion = 0
	if fields == turnFields {
		if t.PolicyVersion = m.uint64(); m.err != nil {
			return bad("policy version", m.err)
		}
	}
	return nil
}
