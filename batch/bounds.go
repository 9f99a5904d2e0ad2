package batch

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/patrdb/patrdb/model"
)

// Every value goes into a tensor of a fixed width; one that does not fit
// refuses the batch (ErrOutOfRange) instead of wrapping. The store
// refuses token ids of 2^31 and more, but a file written before it did
// may hold them.

func outOfRange(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", ErrOutOfRange, model.ErrInvalid, fmt.Sprintf(format, args...))
}

// idsFit reports whether every little-endian uint32 token id in b is
// below 2^31 (fits input_ids' int32), testing two ids a word.
func idsFit(b []byte) bool {
	var or uint64
	i := 0
	for ; i+32 <= len(b); i += 32 {
		or |= binary.LittleEndian.Uint64(b[i:]) | binary.LittleEndian.Uint64(b[i+8:]) |
			binary.LittleEndian.Uint64(b[i+16:]) | binary.LittleEndian.Uint64(b[i+24:])
	}
	for ; i+8 <= len(b); i += 8 {
		or |= binary.LittleEndian.Uint64(b[i:])
	}
	if i+4 <= len(b) {
		or |= uint64(binary.LittleEndian.Uint32(b[i:]))
	}
	return or&0x80000000_80000000 == 0
}

// firstWideBytes is the index and value of the first id in b of 2^31 or
// more (b holds one).
func firstWideBytes(b []byte) (int, uint32) {
	for i := 0; i+4 <= len(b); i += 4 {
		if id := binary.LittleEndian.Uint32(b[i:]); id > math.MaxInt32 {
			return i / 4, id
		}
	}
	return -1, 0
}

// firstWide is the index of the first id of 2^31 or more, if any.
func firstWide(ids []uint32) (int, bool) {
	for i, id := range ids {
		if id > math.MaxInt32 {
			return i, true
		}
	}
	return 0, false
}

// bounds refuses rows whose positions or turn indexes would not fit
// int32: a row of 2^31 tokens or a path of 2^31 turns.
func (bd *builder) bounds() error {
	for ri, n := range bd.tokens {
		last := bd.segs[bd.rowSegments(ri)[len(bd.rowSegments(ri))-1]]
		switch {
		case n > math.MaxInt32:
			return outOfRange("the row of leaf %d holds %d tokens; positions are int32", bd.rows[ri].leaf.ID, n)
		case last.turn0+last.to-last.from > math.MaxInt32:
			return outOfRange("the path of leaf %d has %d turns; turn_index is int32", bd.rows[ri].leaf.ID, last.turn0+last.to-last.from)
		}
	}
	return nil
}
