package store

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/patrdb/patrdb/model"
)

// EncodeTurn and DecodeTurn expose the turn codec for benchmarks and fuzz
// tests; the framing and CRC are included.
func EncodeTurn(t *model.Turn) ([]byte, error) { return encodeTurn(t) }

// DecodeTurn decodes a framed turn value; damage is ErrCorrupt.
func DecodeTurn(raw []byte) (model.Turn, error) {
	var t model.Turn
	err := decodeTurn("turns", nil, raw, &t)
	return t, err
}

// AppendTurns writes turns at own-turn indexes from, from+1, ... of an
// active node. from may be at most the node's turn count: rewriting turns
// after a crash overwrites them, appending past the end leaves no gap.
func (r *RunTx) AppendTurns(id uint64, from int, turns ...model.Turn) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	if len(turns) == 0 {
		return nil
	}
	p, d, err := r.turnTarget(id, from)
	if err != nil {
		return r.tx.fail(err)
	}
	vals := &r.tx.vals
	enc, i, err := encodeValid(turns, r.tx.turnVals[:0], func(t *model.Turn) []byte {
		return vals.finish(appendTurnValue(vals.start(turnSize(t)), t))
	})
	r.tx.turnVals = enc.vals[:0]
	if err != nil {
		return r.tx.fail(fmt.Errorf("turn %d of node %d: %w", from+i, id, err))
	}
	return r.putTurns(p, d, from, enc)
}

// EncodedTurns are turns validated and framed for the file by EncodeTurns,
// ready for RunTx.AppendEncodedTurns. The zero value holds no turns. An
// EncodedTurns is immutable: it may be appended more than once, and used
// from several goroutines.
type EncodedTurns struct {
	vals   [][]byte
	lo, hi uint64 // the least and greatest policy versions given (versionSpan)
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
func EncodeTurns(turns ...model.Turn) (EncodedTurns, error) {
	out, i, err := encodeValid(turns, make([][]byte, 0, len(turns)), func(t *model.Turn) []byte {
		v, _ := encodeTurn(t) // it fails on nothing
		return v
	})
	if err != nil {
		return EncodedTurns{}, fmt.Errorf("turn %d of %d: %w", i, len(turns), err)
	}
	return out, nil
}

// encodeValid encodes turns, appending their values (each made by
// encode) to vals, and validates each turn (validTurn) right after
// encoding it: encoding reads a turn's text and arrays from memory once,
// and the check then finds them in the CPU's cache, where a check that
// came first paid for reading them. On an invalid turn it returns its
// index; the values already made are garbage, nothing was written.
func encodeValid(turns []model.Turn, vals [][]byte, encode func(*model.Turn) []byte) (EncodedTurns, int, error) {
	out := EncodedTurns{vals: vals}
	for i := range turns {
		t := &turns[i]
		out.vals = append(out.vals, encode(t))
		if err := validTurn(t); err != nil {
			return out, i, err
		}
		out.lo, out.hi = versionSpan(out.lo, out.hi, t.PolicyVersion)
	}
	return out, 0, nil
}

// versionSpan folds policy version v (0: not given) into the least and
// greatest versions given so far (0, 0: none).
func versionSpan(lo, hi, v uint64) (uint64, uint64) {
	if v == 0 {
		return lo, hi
	}
	if lo == 0 || v < lo {
		lo = v
	}
	return lo, max(hi, v)
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
	p, d, err := r.turnTarget(id, from)
	if err != nil {
		return r.tx.fail(err)
	}
	return r.putTurns(p, d, from, turns)
}

// turnTarget returns the node turns at index from may be written to: an
// active one, with no gap after its last turn; and its entry in the
// transaction's dirty set (nodeRefDirty).
func (r *RunTx) turnTarget(id uint64, from int) (*model.Node, *dirtyNode, error) {
	p, d, err := r.nodeRefDirty(id)
	if err != nil {
		return nil, nil, err
	}
	if p.Status != model.NodeActive {
		return nil, nil, invalidf("node %d is %s; turns go to active nodes", id, p.Status)
	}
	if from < 0 || from > p.Turns {
		return nil, nil, invalidf("turn index %d leaves a gap after node %d's %d turns", from, id, p.Turns)
	}
	return p, d, nil
}

// putTurns writes src's turns at indexes from, from+1, ... under node p,
// then its record and the EvTurns event. Turns that
// rewrite stored ones keep their keys; new ones take the next numbers of
// the run's turn sequence, so they land at the end of the bucket. The
// values must stay unmodified until the transaction ends: bbolt keeps them
// (queued first: txqueue.go).
func (r *RunTx) putTurns(p *model.Node, d *dirtyNode, from int, src EncodedTurns) error {
	b, err := r.appendBucket(bTurns)
	if err != nil {
		return r.tx.fail(err)
	}
	count := len(src.vals)
	over := min(count, p.Turns-from)
	spans, err := r.turnSpans(p, from, over)
	if err != nil {
		return r.tx.fail(err)
	}
	q := r.queue(bTurns, b)
	i := 0
	for _, s := range spans {
		for j := range s.count {
			q.put(r.tx, r.tx.vals.finish(append(r.tx.vals.start(16), r.spanKey(p.ID, s, j)...)), src.vals[i])
			i++
		}
	}
	old := *p
	d = r.editable(p, d)
	n := d.n
	var seq uint64
	if fresh := count - over; fresh > 0 {
		seq = b.Sequence() + 1
		if err := b.SetSequence(seq + uint64(fresh) - 1); err != nil {
			return r.tx.fail(err)
		}
		// Their keys are carved from the transaction's chunks in one
		// piece, and queued without a search for the queue each.
		keys := r.tx.vals.finish(r.tx.vals.start(16 * fresh)[:16*fresh])
		q.puts = slices.Grow(q.puts, fresh)
		for j := range fresh {
			k := keys[16*j : 16*j+16 : 16*j+16]
			binary.BigEndian.PutUint64(k, seq+uint64(j))
			binary.BigEndian.PutUint64(k[8:], p.ID)
			q.put(r.tx, k, src.vals[i])
			i++
		}
		if !d.ownsRanges { // a copy: other versions of the node may share the ranges
			n.TurnRanges = append(d.ranges[:0:len(d.ranges)], n.TurnRanges...)
			d.ownsRanges = true
		}
		n.TurnRanges = extendOwned(n.TurnRanges, seq, fresh)
		n.Turns = from + count
	}
	n.MinVersion, n.MaxVersion = versionSpan(n.MinVersion, n.MaxVersion, src.lo)
	n.MaxVersion = max(n.MaxVersion, src.hi)
	if err := r.putNode(d, &old, ""); err != nil {
		return r.tx.fail(err)
	}
	tp := model.TurnsPayload{From: from, Count: count, Turns: n.Turns, MinVersion: n.MinVersion, MaxVersion: n.MaxVersion, Seq: seq, Oldest: src.lo}
	_, err = r.putEvent(&model.Event{Kind: model.EvTurns, Step: n.Step, Group: n.Group, Node: p.ID}, turnsPayloadMax,
		func(b []byte) []byte { return appendTurnsPayloadMsgp(b, &tp) })
	return r.tx.fail(err)
}

// Turns returns a node's own turns.
func (r *RunTx) Turns(id uint64) ([]model.Turn, error) {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return nil, err
		}
		return p.Turns(id)
	}
	n, err := r.nodeRef(id)
	if err != nil {
		return nil, err
	}
	out := make([]model.Turn, 0, n.Turns)
	err = r.readTurns(id, n.Turns, func(_ int, t model.Turn) { out = append(out, t) })
	return out, err
}

// Turn returns one of a node's own turns.
func (r *RunTx) Turn(id uint64, index int) (model.Turn, error) {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return model.Turn{}, err
		}
		return p.Turn(id, index)
	}
	var t model.Turn
	b, err := r.bucket(bTurns)
	if err != nil {
		return t, err
	}
	n, err := r.nodeRef(id)
	if err != nil {
		return t, err
	}
	if index < 0 || index >= n.Turns {
		return t, notFoundf("turn %d of node %d of run %q", index, id, r.id)
	}
	spans, err := r.turnSpans(n, index, 1)
	if err != nil {
		return t, err
	}
	k := r.spanKey(id, spans[0], 0)
	raw := b.Get(k)
	if raw == nil {
		return t, &CorruptError{Bucket: r.bpath(bTurns), Key: k, Reason: "turn missing"}
	}
	err = decodeTurn(r.bpath(bTurns), k, raw, &t)
	return t, err
}

// readTurns decodes the first count own turns of a node with one cursor
// seek; a missing turn is corruption (the node record says it exists).
func (r *RunTx) readTurns(id uint64, count int, fn func(int, model.Turn)) error {
	return r.walkTurns(id, count, func(i int, path string, k, v []byte) error {
		var t model.Turn
		if err := decodeTurn(path, k, v, &t); err != nil {
			return err
		}
		fn(i, t)
		return nil
	})
}

// walkTurns calls fn with the key and raw value of each of the first
// count own turns of a node, one cursor seek per range of its turns.
func (r *RunTx) walkTurns(id uint64, count int, fn func(i int, path string, k, v []byte) error) error {
	if count == 0 {
		return nil
	}
	b, err := r.bucket(bTurns)
	if err != nil {
		return err
	}
	n, err := r.nodeRef(id)
	if err != nil {
		return err
	}
	spans, err := r.turnSpans(n, 0, count)
	if err != nil {
		return err
	}
	path := r.bpath(bTurns)
	c := b.Cursor()
	i := 0
	for _, s := range spans {
		k, v := c.Seek(r.spanKey(id, s, 0))
		for j := range s.count {
			if j > 0 {
				k, v = c.Next()
			}
			if !r.isSpanKey(k, id, s, j) {
				return &CorruptError{Bucket: path, Key: r.spanKey(id, s, j), Reason: "turn missing"}
			}
			if err := fn(i, path, k, v); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// extendOwned is TurnRanges.Extend in place, for ranges only this
// transaction's version of the node holds (dirtyNode.ownsRanges): a node
// given its turns one call at a time extends its last range each call,
// and copying the ranges for each took an allocation a turn.
func extendOwned(rs model.TurnRanges, seq uint64, count int) model.TurnRanges {
	if n := len(rs); n > 0 && rs[n-1].Seq+uint64(rs[n-1].Count) == seq {
		rs[n-1].Count += count
		return rs
	}
	return append(rs, model.TurnRange{Seq: seq, Count: count})
}
