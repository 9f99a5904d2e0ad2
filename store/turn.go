package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"

	"github.com/vmihailenco/msgpack/v5"
)

// Turns are the bulk of a file (hundreds of tokens each), so they skip
// reflection: a fixed msgpack array written and read field by field, token
// arrays as bin blobs of little-endian words.
const turnFields = 7

func encodeTurn(t *Turn) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	buf.Write([]byte{valueFormatV1, 0, 0, 0, 0})
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	err := enc.EncodeArrayLen(turnFields)
	if err == nil {
		err = enc.EncodeString(t.Action)
	}
	scratch := make([]byte, 0, 4*max(len(t.ActionTokens), len(t.ActionLogprobs), len(t.ObservationTokens)))
	if err == nil {
		err = enc.EncodeBytes(packU32(scratch[:0], t.ActionTokens))
	}
	if err == nil {
		err = enc.EncodeBytes(packF32(scratch[:0], t.ActionLogprobs))
	}
	if err == nil {
		err = enc.EncodeString(t.Observation)
	}
	if err == nil {
		err = enc.EncodeBytes(packU32(scratch[:0], t.ObservationTokens))
	}
	if err == nil {
		err = enc.EncodeFloat64(t.Reward)
	}
	if err == nil {
		err = enc.EncodeBool(t.Done)
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, buf.Len())
	copy(out, buf.Bytes())
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(out[headerLen:], castagnoli))
	return out, nil
}

func decodeTurn(bucket string, key, raw []byte, t *Turn) error {
	payload, err := checkFrame(bucket, key, raw)
	if err != nil {
		return err
	}
	bad := func(what string) error {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "turn: " + what}
	}
	dec := msgpack.GetDecoder()
	defer msgpack.PutDecoder(dec)
	dec.Reset(bytes.NewReader(payload))
	n, err := dec.DecodeArrayLen()
	if err != nil || n != turnFields {
		return bad("not a 7-field array")
	}
	var blob []byte
	var ok bool
	if t.Action, err = dec.DecodeString(); err != nil {
		return bad("action: " + err.Error())
	}
	if blob, err = dec.DecodeBytes(); err != nil {
		return bad("action tokens: " + err.Error())
	}
	if t.ActionTokens, ok = unpackU32(blob); !ok {
		return bad("action tokens length not a multiple of 4")
	}
	if blob, err = dec.DecodeBytes(); err != nil {
		return bad("action logprobs: " + err.Error())
	}
	if t.ActionLogprobs, ok = unpackF32(blob); !ok {
		return bad("action logprobs length not a multiple of 4")
	}
	if t.Observation, err = dec.DecodeString(); err != nil {
		return bad("observation: " + err.Error())
	}
	if blob, err = dec.DecodeBytes(); err != nil {
		return bad("observation tokens: " + err.Error())
	}
	if t.ObservationTokens, ok = unpackU32(blob); !ok {
		return bad("observation tokens length not a multiple of 4")
	}
	if t.Reward, err = dec.DecodeFloat64(); err != nil {
		return bad("reward: " + err.Error())
	}
	if t.Done, err = dec.DecodeBool(); err != nil {
		return bad("done: " + err.Error())
	}
	return nil
}

// EncodeTurn and DecodeTurn expose the turn codec for benchmarks and fuzz
// tests; the framing and CRC are included.
func EncodeTurn(t *Turn) ([]byte, error) { return encodeTurn(t) }

// DecodeTurn decodes a framed turn value; damage is ErrCorrupt.
func DecodeTurn(raw []byte) (Turn, error) {
	var t Turn
	err := decodeTurn("turns", nil, raw, &t)
	return t, err
}

// AppendTurns writes turns at own-turn indexes from, from+1, ... of an
// active node. from may be at most the node's turn count: rewriting turns
// after a crash overwrites them, appending past the end leaves no gap.
func (r *RunTx) AppendTurns(id uint64, from int, turns ...Turn) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	if len(turns) == 0 {
		return nil
	}
	p, err := r.nodeRef(id)
	if err != nil {
		return r.tx.fail(err)
	}
	if p.Status != NodeActive {
		return r.tx.fail(invalidf("node %d is %s; turns go to active nodes", id, p.Status))
	}
	if from < 0 || from > p.Turns {
		return r.tx.fail(invalidf("turn index %d leaves a gap after node %d's %d turns", from, id, p.Turns))
	}
	for i := range turns {
		if !finite(turns[i].Reward) {
			return r.tx.fail(invalidf("turn %d of node %d has reward %v", from+i, id, turns[i].Reward))
		}
	}
	b, err := r.bucket(bTurns)
	if err != nil {
		return r.tx.fail(err)
	}
	for i := range turns {
		val, err := encodeTurn(&turns[i])
		if err != nil {
			return r.tx.fail(err)
		}
		if err := b.Put(turnKey(id, from+i), val); err != nil {
			return r.tx.fail(err)
		}
	}
	n := p.clone()
	if end := from + len(turns); end > n.Turns {
		n.Turns = end
	}
	if err := r.putNode(&n, ""); err != nil {
		return r.tx.fail(err)
	}
	pl, err := encodeValue(&TurnsPayload{From: from, Count: len(turns), Turns: n.Turns})
	if err != nil {
		return r.tx.fail(err)
	}
	return r.tx.fail(r.appendEvent(Event{Kind: EvTurns, Step: n.Step, Group: n.Group, Node: id}, pl))
}

// Turns returns a node's own turns.
func (r *RunTx) Turns(id uint64) ([]Turn, error) {
	n, err := r.nodeRef(id)
	if err != nil {
		return nil, err
	}
	out := make([]Turn, 0, n.Turns)
	err = r.readTurns(id, n.Turns, func(_ int, t Turn) { out = append(out, t) })
	return out, err
}

// Turn returns one of a node's own turns.
func (r *RunTx) Turn(id uint64, index int) (Turn, error) {
	var t Turn
	b, err := r.bucket(bTurns)
	if err != nil {
		return t, err
	}
	if index < 0 {
		return t, notFoundf("turn %d of node %d", index, id)
	}
	k := turnKey(id, index)
	raw := b.Get(k)
	if raw == nil {
		return t, notFoundf("turn %d of node %d of run %q", index, id, r.id)
	}
	err = decodeTurn(r.bpath(bTurns), k, raw, &t)
	return t, err
}

// readTurns decodes the first count own turns of a node with one cursor
// seek; a missing turn is corruption (the node record says it exists).
func (r *RunTx) readTurns(id uint64, count int, fn func(int, Turn)) error {
	if count == 0 {
		return nil
	}
	b, err := r.bucket(bTurns)
	if err != nil {
		return err
	}
	c := b.Cursor()
	k, v := c.Seek(turnKey(id, 0))
	for i := 0; i < count; i, k, v = i+1, nil, nil {
		if i > 0 {
			k, v = c.Next()
		}
		if k == nil || len(k) != 16 || keyU64(k, 0) != id || keyU64(k, 1) != uint64(i) {
			return &CorruptError{Bucket: r.bpath(bTurns), Key: turnKey(id, i), Reason: "turn missing"}
		}
		var t Turn
		if err := decodeTurn(r.bpath(bTurns), k, v, &t); err != nil {
			return err
		}
		fn(i, t)
	}
	return nil
}
