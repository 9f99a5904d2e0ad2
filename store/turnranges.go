package store

import (
	"encoding/binary"
	"fmt"
	"github.com/patrdb/patrdb/model"

	"github.com/vmihailenco/msgpack/v5"
)

// packTurnRanges appends the packed form of rs (without a msgpack header).
func packTurnRanges(dst []byte, rs model.TurnRanges) []byte {
	var end uint64
	for _, r := range rs {
		dst = binary.AppendUvarint(dst, r.Seq-end)
		dst = binary.AppendUvarint(dst, uint64(r.Count))
		end = r.Seq + uint64(r.Count)
	}
	return dst
}

// turnRangesLen is len(packTurnRanges(nil, rs)).
func turnRangesLen(rs model.TurnRanges) int {
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
func unpackTurnRanges(b []byte) (model.TurnRanges, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var out model.TurnRanges
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
		out = append(out, model.TurnRange{Seq: seq, Count: int(count)})
		end = seq + count
	}
	return out, nil
}

// msgpackEncode writes the ranges as one bin value (none: nil).
func msgpackEncodeTurnRanges(enc *msgpack.Encoder, rs model.TurnRanges) error {
	if len(rs) == 0 {
		return enc.EncodeNil()
	}
	return enc.EncodeBytes(packTurnRanges(nil, rs))
}

// msgpackDecode reads what msgpackEncode wrote.
func msgpackDecodeTurnRanges(dec *msgpack.Decoder, rs *model.TurnRanges) error {
	b, err := dec.DecodeBytes()
	if err != nil {
		return err
	}
	*rs, err = unpackTurnRanges(b)
	return err
}
