package store

import (
	"sort"

	"github.com/patrdb/patrdb/model"
)

// The group record: a 10-element msgpack array — id, step, task, prompt,
// gold, roots (array of ids), status, interval, meta (map, keys sorted so
// one record has one encoding), prompt token ids (bin of little-endian
// uint32s). Format 1 wrote the first 9.
const (
	groupFields   = 10
	groupFieldsV1 = 9
)

// encodeGroup frames g's record (the bytes msgpack/v5 writes for it).
func encodeGroup(g *model.Group) []byte {
	return frame(appendGroupMsgp(make([]byte, headerLen, headerLen+groupSizeHint(g)), g))
}

// groupSizeHint is about the size of g's record (its payload): a buffer's
// capacity, not a bound.
func groupSizeHint(g *model.Group) int {
	size := 48 + len(g.Task) + len(g.Prompt) + len(g.Gold) + 9*len(g.Roots) + 4*len(g.PromptTokens)
	for k, v := range g.Meta {
		size += 10 + len(k) + len(v)
	}
	return size
}

func appendGroupMsgp(b []byte, g *model.Group) []byte {
	b = appendArrayLen(b, groupFields)
	b = appendUint(b, g.ID)
	b = appendUint(b, g.Step)
	b = appendStr(b, g.Task)
	b = appendStr(b, g.Prompt)
	b = appendStr(b, g.Gold)
	b = appendUints(b, g.Roots)
	b = appendStr(b, string(g.Status))
	b = appendInt(b, int64(g.Interval))
	b = appendStrMap(b, g.Meta)
	if g.PromptTokens == nil {
		return append(b, 0xc0)
	}
	return model.AppendWords(appendBinHeader(b, 4*len(g.PromptTokens)), g.PromptTokens)
}

// appendUints writes a []uint64 field: nil as msgpack nil.
func appendUints(b []byte, xs []uint64) []byte {
	if xs == nil {
		return append(b, 0xc0)
	}
	b = appendArrayLen(b, len(xs))
	for _, x := range xs {
		b = appendUint(b, x)
	}
	return b
}

// appendStrMap writes a map[string]string field with its keys sorted: nil
// as msgpack nil.
func appendStrMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, 0xc0)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = appendMapLen(b, len(m))
	for _, k := range keys {
		b = appendStr(appendStr(b, k), m[k])
	}
	return b
}

// decodeGroupMsgp reads a group record in canonical form (see decodeFast).
func decodeGroupMsgp(payload []byte, g *model.Group) bool {
	m := msgpReader{b: payload}
	fields := m.arrayLen()
	if fields != groupFields && fields != groupFieldsV1 {
		return false
	}
	g.ID = m.uint64()
	g.Step = m.uint64()
	g.Task = m.str()
	g.Prompt = m.str()
	g.Gold = m.str()
	var ok bool
	if g.Roots, ok = decodeUints(&m); !ok {
		return false
	}
	status, _ := m.bytes()
	switch model.GroupStatus(status) {
	case model.GroupOpen:
		g.Status = model.GroupOpen
	case model.GroupClosed:
		g.Status = model.GroupClosed
	default:
		g.Status = model.GroupStatus(status)
	}
	g.Interval = m.int()
	switch n := m.mapLen(); {
	case m.err != nil:
		return false
	case n == -1:
		g.Meta = nil
	case n < 0 || 2*n > len(m.b)-m.pos: // every key and value takes a byte at least
		return false
	default:
		g.Meta = make(map[string]string, n)
		for range n {
			k := m.str()
			g.Meta[k] = m.str()
		}
	}
	g.PromptTokens = nil
	if fields == groupFields {
		blob, isNil := m.bytes()
		if m.err != nil {
			return false
		}
		if !isNil {
			ids, ok := model.Words(blob)
			if !ok {
				return false
			}
			g.PromptTokens = ids
		}
	}
	return m.err == nil
}

// decodeUints reads a []uint64 field as msgpack/v5 fills one: nil stays
// nil, an empty array is empty and non-nil.
func decodeUints(m *msgpReader) ([]uint64, bool) {
	switch n := m.arrayLen(); {
	case m.err != nil:
		return nil, false
	case n == -1:
		return nil, true
	case n < 0 || n > len(m.b)-m.pos: // every id takes a byte at least
		return nil, false
	default:
		out := make([]uint64, n)
		for i := range out {
			out[i] = m.uint64()
		}
		return out, m.err == nil
	}
}
