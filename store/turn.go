package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"unicode/utf8"
)

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
func turnSize(t *Turn) int {
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
func encodeTurn(t *Turn) ([]byte, error) {
	out := make([]byte, headerLen, turnSize(t))
	out[0] = valueFormatV1
	out = appendArrayLen(out, turnFields)
	out = appendStr(out, t.Action)
	out = packU32(appendBinHeader(out, 4*len(t.ActionTokens)), t.ActionTokens)
	out = packF32(appendBinHeader(out, 4*len(t.ActionLogprobs)), t.ActionLogprobs)
	out = appendStr(out, t.Observation)
	out = packU32(appendBinHeader(out, 4*len(t.ObservationTokens)), t.ObservationTokens)
	out = appendFloat64(out, t.Reward)
	out = appendBool(out, t.Done)
	out = appendUint64(out, t.PolicyVersion)
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(out[headerLen:], castagnoli))
	return out, nil
}

// decodeTurn parses a framed turn straight from raw (which may be a page
// of the mmap): strings and token arrays are copied out once each. Bytes
// after the last field are ignored, as msgpack/v5 ignored them.
func decodeTurn(bucket string, key, raw []byte, t *Turn) error {
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
	if t.ActionTokens, ok = unpackU32(blob); !ok {
		return bad("action tokens length not a multiple of 4", nil)
	}
	if blob, _ = m.bytes(); m.err != nil {
		return bad("action logprobs", m.err)
	}
	if t.ActionLogprobs, ok = unpackF32(blob); !ok {
		return bad("action logprobs length not a multiple of 4", nil)
	}
	if t.Observation = m.str(); m.err != nil {
		return bad("observation", m.err)
	}
	if blob, _ = m.bytes(); m.err != nil {
		return bad("observation tokens", m.err)
	}
	if t.ObservationTokens, ok = unpackU32(blob); !ok {
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

// validTurn is the rule every stored turn keeps: text is valid UTF-8 (a
// JSON or Parquet reader would otherwise get U+FFFD in its place), the
// reward is finite, and the logprobs, when given, are one finite value
// <= 0 per action token (a trainer computes importance ratios from them).
func validTurn(t *Turn) error {
	switch {
	case !utf8.ValidString(t.Action):
		return invalidf("action text is not valid UTF-8")
	case !utf8.ValidString(t.Observation):
		return invalidf("observation text is not valid UTF-8")
	case !finite(t.Reward):
		return invalidf("reward %v is not finite", t.Reward)
	case len(t.ActionLogprobs) != 0 && len(t.ActionLogprobs) != len(t.ActionTokens):
		return invalidf("%d action logprobs for %d action tokens (give one per token, or none)", len(t.ActionLogprobs), len(t.ActionTokens))
	}
	for i, lp := range t.ActionLogprobs {
		if !(lp <= 0) || math.IsInf(float64(lp), -1) {
			return invalidf("action logprob %d is %v; want a finite value <= 0", i, lp)
		}
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
	p, err := r.turnTarget(id, from)
	if err != nil {
		return r.tx.fail(err)
	}
	for i := range turns {
		if err := validTurn(&turns[i]); err != nil {
			return r.tx.fail(fmt.Errorf("turn %d of node %d: %w", from+i, id, err))
		}
	}
	versions := make([][2]uint64, len(turns))
	for i := range turns {
		versions[i] = [2]uint64{turns[i].PolicyVersion, turns[i].PolicyVersion}
	}
	return r.putTurns(p, from, len(turns), versions, func(i int) ([]byte, error) { return encodeTurn(&turns[i]) })
}

// EncodedTurns are turns validated and framed for the file by EncodeTurns,
// ready for RunTx.AppendEncodedTurns. The zero value holds no turns. An
// EncodedTurns is immutable: it may be appended more than once, and used
// from several goroutines.
type EncodedTurns struct {
	vals     [][]byte
	versions [][2]uint64 // each turn's policy version, twice (min, max of one)
}

// Len is the number of turns held.
func (e EncodedTurns) Len() int { return len(e.vals) }

// EncodeTurns validates and encodes turns outside any transaction, for
// RunTx.AppendEncodedTurns. Encoding is most of the CPU an append of large
// turns costs (a copy of every token array, a CRC of every value); a
// trainer that encodes each rollout's turns as they arrive, in the
// goroutines that collect them or while the previous interval commits,
// holds the single write transaction only for the b-tree and the fsync.
// It touches no store and is safe for concurrent use. AppendTurns(id,
// from, turns...) writes the same bytes as AppendEncodedTurns(id, from,
// EncodeTurns(turns...)).
func EncodeTurns(turns ...Turn) (EncodedTurns, error) {
	vals := make([][]byte, len(turns))
	versions := make([][2]uint64, len(turns))
	for i := range turns {
		versions[i] = [2]uint64{turns[i].PolicyVersion, turns[i].PolicyVersion}
		if err := validTurn(&turns[i]); err != nil {
			return EncodedTurns{}, fmt.Errorf("turn %d of %d: %w", i, len(turns), err)
		}
		v, err := encodeTurn(&turns[i])
		if err != nil {
			return EncodedTurns{}, err
		}
		vals[i] = v
	}
	return EncodedTurns{vals: vals, versions: versions}, nil
}

// AppendEncodedTurns is AppendTurns for turns encoded beforehand by
// EncodeTurns: the same checks of the node and of from, the same records
// and event, without encoding inside the transaction.
func (r *RunTx) AppendEncodedTurns(id uint64, from int, turns EncodedTurns) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	if len(turns.vals) == 0 {
		return nil
	}
	p, err := r.turnTarget(id, from)
	if err != nil {
		return r.tx.fail(err)
	}
	return r.putTurns(p, from, len(turns.vals), turns.versions, func(i int) ([]byte, error) { return turns.vals[i], nil })
}

// turnTarget returns the node turns at index from may be written to: an
// active one, with no gap after its last turn.
func (r *RunTx) turnTarget(id uint64, from int) (*Node, error) {
	p, err := r.nodeRef(id)
	if err != nil {
		return nil, err
	}
	if p.Status != NodeActive {
		return nil, invalidf("node %d is %s; turns go to active nodes", id, p.Status)
	}
	if from < 0 || from > p.Turns {
		return nil, invalidf("turn index %d leaves a gap after node %d's %d turns", from, id, p.Turns)
	}
	return p, nil
}

// putTurns writes count turn values (value(i) is the framed turn at index
// from+i) under node p, then its record and the EvTurns event. The values
// must stay unmodified until the transaction ends: bbolt keeps them.
func (r *RunTx) putTurns(p *Node, from, count int, versions [][2]uint64, value func(int) ([]byte, error)) error {
	b, err := r.bucket(bTurns)
	if err != nil {
		return r.tx.fail(err)
	}
	for i := range count {
		val, err := value(i)
		if err != nil {
			return r.tx.fail(err)
		}
		if err := b.Put(turnKey(p.ID, from+i), val); err != nil {
			return r.tx.fail(err)
		}
	}
	n := p.clone()
	if end := from + count; end > n.Turns {
		n.Turns = end
	}
	for _, v := range versions {
		if v[0] == 0 {
			continue // the writer did not say
		}
		if n.MinVersion == 0 || v[0] < n.MinVersion {
			n.MinVersion = v[0]
		}
		n.MaxVersion = max(n.MaxVersion, v[1])
	}
	if err := r.putNode(p, &n, ""); err != nil {
		return r.tx.fail(err)
	}
	pl, err := encodeValue(&TurnsPayload{From: from, Count: count, Turns: n.Turns, MinVersion: n.MinVersion, MaxVersion: n.MaxVersion})
	if err != nil {
		return r.tx.fail(err)
	}
	return r.tx.fail(r.appendEvent(Event{Kind: EvTurns, Step: n.Step, Group: n.Group, Node: p.ID}, pl))
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
	return r.walkTurns(id, count, func(i int, path string, k, v []byte) error {
		var t Turn
		if err := decodeTurn(path, k, v, &t); err != nil {
			return err
		}
		fn(i, t)
		return nil
	})
}

// walkTurns calls fn with the key and raw value of each of the first
// count own turns of a node, with one cursor seek.
func (r *RunTx) walkTurns(id uint64, count int, fn func(i int, path string, k, v []byte) error) error {
	if count == 0 {
		return nil
	}
	b, err := r.bucket(bTurns)
	if err != nil {
		return err
	}
	path := r.bpath(bTurns)
	c := b.Cursor()
	k, v := c.Seek(turnKey(id, 0))
	for i := 0; i < count; i++ {
		if i > 0 {
			k, v = c.Next()
		}
		if k == nil || len(k) != 16 || keyU64(k, 0) != id || keyU64(k, 1) != uint64(i) {
			return &CorruptError{Bucket: path, Key: turnKey(id, i), Reason: "turn missing"}
		}
		if err := fn(i, path, k, v); err != nil {
			return err
		}
	}
	return nil
}
