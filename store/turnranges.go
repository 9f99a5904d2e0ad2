package store

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
)

// TurnRange is a run of a node's own turns stored under consecutive turn
// sequence numbers Seq, Seq+1, ..., Seq+Count-1 (format 3 on). A node's
// ranges, in order, hold its own turns 0, 1, 2, ...
type TurnRange struct {
	Seq   uint64
	Count int
}

// TurnRanges are a node's turn ranges. A branch appends a few turns per
// commit while its siblings append theirs, so it gets one range per
// commit; they are stored packed — one bin value of uvarint pairs, the gap
// from the previous range's end and the count — a couple of bytes each.
type TurnRanges []TurnRange

var (
	_ msgpack.CustomEncoder = TurnRanges(nil)
	_ msgpack.CustomDecoder = (*TurnRanges)(nil)
)

// total is how many turns the ranges hold.
func (rs TurnRanges) total() int {
	n := 0
	for _, r := range rs {
		n += r.Count
	}
	return n
}

// extend returns rs with count turns from seq on, the last range grown
// when seq follows it. rs is left as it was: a node's ranges are shared
// with its earlier versions.
func (rs TurnRanges) extend(seq uint64, count int) TurnRanges {
	if count <= 0 {
		return rs
	}
	if n := len(rs); n > 0 && rs[n-1].Seq+uint64(rs[n-1].Count) == seq {
		out := slices.Clone(rs)
		out[n-1].Count += count
		return out
	}
	return append(slices.Clip(rs), TurnRange{Seq: seq, Count: count})
}

// pack appends the packed form (without a msgpack header).
func (rs TurnRanges) pack(dst []byte) []byte {
	var end uint64
	for _, r := range rs {
		dst = binary.AppendUvarint(dst, r.Seq-end)
		dst = binary.AppendUvarint(dst, uint64(r.Count))
		end = r.Seq + uint64(r.Count)
	}
	return dst
}

// packedLen is len(rs.pack(nil)).
func (rs TurnRanges) packedLen() int {
	var end uint64
	n := 0
	for _, r := range rs {
		n += uvarintLen(r.Seq-end) + uvarintLen(uint64(r.Count))
		end = r.Seq + uint64(r.Count)
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// unpackTurnRanges reads the packed form. Ranges ascend, do not overlap,
// hold at least one turn each and start after 0; anything else is damage.
func unpackTurnRanges(b []byte) (TurnRanges, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var out TurnRanges
	var end uint64
	for len(b) > 0 {
		gap, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("turn ranges: bad varint")
		}
		b = b[n:]
		count, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, fmt.Errorf("turn ranges: bad varint")
		}
		b = b[n:]
		seq := end + gap
		if count == 0 || count > 1<<31 || seq < end || seq == 0 || seq+count < seq {
			return nil, fmt.Errorf("turn ranges: range %d+%d after %d", seq, count, end)
		}
		if len(out) > 0 && gap == 0 {
			return nil, fmt.Errorf("turn ranges: ranges %d and %d touch", len(out)-1, len(out))
		}
		out = append(out, TurnRange{Seq: seq, Count: int(count)})
		end = seq + count
	}
	return out, nil
}

// EncodeMsgpack writes the ranges as one bin value (none: nil).
func (rs TurnRanges) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(rs) == 0 {
		return enc.EncodeNil()
	}
	return enc.EncodeBytes(rs.pack(nil))
}

// DecodeMsgpack reads what EncodeMsgpack wrote.
func (rs *TurnRanges) DecodeMsgpack(dec *msgpack.Decoder) error {
	b, err := dec.DecodeBytes()
	if err != nil {
		return err
	}
	*rs, err = unpackTurnRanges(b)
	return err
}
