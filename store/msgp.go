package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Hand-written msgpack for the records read and written in bulk: turns
// (every append and every trajectory), events (every replay) and nodes
// (every replayed node event, every cache miss). Going through
// msgpack/v5's reflective path cost most of the time of those operations
// (type-cache lookups, a bytes.Reader, a second copy of every token blob).
//
// The writers produce exactly the bytes msgpack/v5's Encoder produces for
// the same values, so the file format does not change. The reader accepts
// exactly what msgpack/v5's typed decoders accept for the Go type being
// filled — nil as the zero value, str and bin interchangeably, any integer
// width for an integer or a float, float32 for a float64 — and yields the
// same values, so a value decodes to the same record either way
// (msgp_test.go checks both directions against msgpack/v5).

// msgpReader reads msgpack from a byte slice without copying: str and bin
// values alias the slice. The first failure sticks in err, and every later
// read returns a zero value, so a decoder checks err once per field (or
// once at the end) and a damaged value can never index out of range. It
// advances an index rather than reslicing, so reading stores no pointer
// (no GC write barrier per field).
type msgpReader struct {
	b   []byte
	pos int
	err error
}

// fail records err, the first failure, and moves to the end, so that no
// later read finds a byte to read: int64 reads without testing err.
func (m *msgpReader) fail(err error) {
	if m.err == nil {
		m.err = err
	}
	m.pos = len(m.b)
}

// failLen records a length header that runs past the end; kept out of
// next so that next inlines.
func (m *msgpReader) failLen(n int) {
	if m.err == nil {
		m.fail(fmt.Errorf("a length of %d exceeds the %d bytes left", n, len(m.b)-m.pos))
	}
}

func (m *msgpReader) failCode(c byte, want string) {
	if m.err == nil {
		m.fail(fmt.Errorf("code 0x%02x is not %s", c, want))
	}
}

// next returns the following n bytes, or nil (and fails) when fewer are
// left. n comes from a length header and may be anything.
func (m *msgpReader) next(n int) []byte {
	if m.err != nil || n < 0 || n > len(m.b)-m.pos {
		m.failLen(n)
		return nil
	}
	out := m.b[m.pos : m.pos+n : m.pos+n]
	m.pos += n
	return out
}

func (m *msgpReader) code() byte {
	if m.err != nil || m.pos >= len(m.b) {
		m.failLen(1)
		return 0
	}
	c := m.b[m.pos]
	m.pos++
	return c
}

// be reads an n-byte big-endian unsigned integer (n = 1, 2, 4 or 8; 0
// when fewer bytes are left). A replay decodes six integers an event, so
// each width is one load, not a loop.
func (m *msgpReader) be(n int) uint64 {
	switch b := m.next(n); len(b) {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(b))
	case 4:
		return uint64(binary.BigEndian.Uint32(b))
	case 8:
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// arrayLen reads an array header; nil is -1, as msgpack/v5 reports it.
func (m *msgpReader) arrayLen() int {
	switch c := m.code(); {
	case m.err != nil:
	case c == 0xc0:
		return -1
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f)
	case c == 0xdc:
		return int(m.be(2))
	case c == 0xdd:
		return int(m.be(4))
	default:
		m.failCode(c, "an array")
	}
	return 0
}

// bytes reads a str or bin value (msgpack/v5 takes either for a string or
// a []byte) and returns it aliasing the input; nil reports a msgpack nil.
// An empty value is a non-nil empty slice, as msgpack/v5 makes it.
func (m *msgpReader) bytes() (b []byte, isNil bool) {
	var n int
	switch c := m.code(); {
	case m.err != nil:
		return nil, false
	case c == 0xc0:
		return nil, true
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = int(m.be(1))
	case c == 0xda || c == 0xc5:
		n = int(m.be(2))
	case c == 0xdb || c == 0xc6:
		n = int(m.be(4))
	default:
		m.failCode(c, "a string or binary")
		return nil, false
	}
	return m.next(n), false
}

// str reads a string: nil and every empty value are "".
func (m *msgpReader) str() string {
	b, _ := m.bytes()
	return string(b)
}

// bin reads a []byte field: nil stays nil, an empty value is empty and
// non-nil; the result is a copy.
func (m *msgpReader) bin() []byte {
	switch b, isNil := m.bytes(); {
	case isNil || m.err != nil:
		return nil
	case len(b) == 0:
		return []byte{}
	default:
		return append([]byte(nil), b...) // not zeroed first, unlike make
	}
}

// int64 reads any integer (msgpack/v5's DecodeInt64): nil is 0, unsigned
// 64-bit values wrap. A replay decodes six an event, so the code and the
// bytes after it are read straight from the slice, with one bounds test.
func (m *msgpReader) int64() int64 {
	p := m.pos
	if p >= len(m.b) {
		m.failLen(1)
		return 0
	}
	c := m.b[p]
	if c <= 0x7f || c >= 0xe0 { // positive and negative fixint
		m.pos = p + 1
		return int64(int8(c))
	}
	w := int(intWidth[c])
	if w == 0 {
		if c == 0xc0 {
			m.pos = p + 1
			return 0
		}
		m.failCode(c, "an integer")
		return 0
	}
	if len(m.b)-p-1 < w {
		m.pos = p + 1
		m.failLen(w)
		return 0
	}
	b := m.b[p+1 : p+1+w]
	m.pos = p + 1 + w
	switch c {
	case 0xcf, 0xd3:
		return int64(binary.BigEndian.Uint64(b))
	case 0xcc:
		return int64(b[0])
	case 0xd0:
		return int64(int8(b[0]))
	case 0xcd:
		return int64(binary.BigEndian.Uint16(b))
	case 0xd1:
		return int64(int16(binary.BigEndian.Uint16(b)))
	case 0xce:
		return int64(binary.BigEndian.Uint32(b))
	}
	return int64(int32(binary.BigEndian.Uint32(b))) // 0xd2
}

// intWidth is the byte count after each msgpack integer code that has one
// (0: not such a code): one load where a chain of compares found it.
var intWidth = [256]uint8{0xcc: 1, 0xd0: 1, 0xcd: 2, 0xd1: 2, 0xce: 4, 0xd2: 4, 0xcf: 8, 0xd3: 8}

// uint64 reads any integer (msgpack/v5's DecodeUint64): nil is 0, negative
// values wrap.
func (m *msgpReader) uint64() uint64 { return uint64(m.int64()) }

// int reads a Go int the way msgpack/v5 sets one (SetInt truncates).
func (m *msgpReader) int() int { return int(m.int64()) }

// float64 reads a float64 (msgpack/v5's DecodeFloat64): float32 and
// float64, or any integer converted.
func (m *msgpReader) float64() float64 {
	if m.err != nil || m.pos >= len(m.b) {
		m.failLen(1)
		return 0
	}
	switch m.b[m.pos] {
	case 0xca:
		m.pos++
		return float64(math.Float32frombits(uint32(m.be(4))))
	case 0xcb:
		m.pos++
		return math.Float64frombits(m.be(8))
	}
	return float64(m.int64()) // integers, or the error for anything else
}

// bool reads a bool: nil is false.
func (m *msgpReader) bool() bool {
	switch c := m.code(); {
	case m.err != nil:
	case c == 0xc3:
		return true
	case c == 0xc2 || c == 0xc0:
	default:
		m.failCode(c, "a bool")
	}
	return false
}

// Writers, with the sizes they take, matching msgpack/v5's Encoder byte
// for byte (EncodeArrayLen, EncodeString, EncodeBytes of a non-nil slice,
// EncodeFloat64, EncodeBool).

func strHeaderLen(n int) int {
	switch {
	case n < 32:
		return 1
	case n < 1<<8:
		return 2
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func binHeaderLen(n int) int {
	switch {
	case n < 1<<8:
		return 2
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xdc, byte(n>>8), byte(n))
	}
	return append(b, 0xdd, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n == 0: // no call to copy nothing: a record's optional strings are mostly empty
		return append(b, 0xa0)
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 1<<8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

// appendBinHeader writes the header of an n-byte bin value.
func appendBinHeader(b []byte, n int) []byte {
	switch {
	case n < 1<<8:
		return append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xc5, byte(n>>8), byte(n))
	}
	return append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendFloat64(b []byte, x float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(x))
}

// appendUint64 always takes the 9-byte form, so a turn's size does not
// depend on the value.
func appendUint64(b []byte, x uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcf), x)
}

func appendBool(b []byte, x bool) []byte {
	if x {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// appendUint writes x in its shortest form (msgpack/v5's EncodeUint with
// compact ints, which the reflective encoder uses for every record).
func appendUint(b []byte, x uint64) []byte {
	switch {
	case x <= math.MaxInt8:
		return append(b, byte(x))
	case x <= math.MaxUint8:
		return append(b, 0xcc, byte(x))
	case x <= math.MaxUint16:
		return append(b, 0xcd, byte(x>>8), byte(x))
	case x <= math.MaxUint32:
		return append(b, 0xce, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	return appendUint64(b, x)
}

// appendInt writes x in its shortest form (EncodeInt with compact ints).
// A node record is mostly small counts and indexes, written as one byte
// here, inlined, without a call.
func appendInt(b []byte, x int64) []byte {
	if uint64(x) <= math.MaxInt8 {
		return append(b, byte(x))
	}
	return appendIntWide(b, x)
}

func appendIntWide(b []byte, x int64) []byte {
	switch {
	case x >= 0:
		return appendUint(b, uint64(x))
	case x >= -32:
		return append(b, byte(x))
	case x >= math.MinInt8:
		return append(b, 0xd0, byte(x))
	case x >= math.MinInt16:
		return append(b, 0xd1, byte(x>>8), byte(x))
	case x >= math.MinInt32:
		return append(b, 0xd2, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(x))
}

// appendBin writes a []byte field: nil as msgpack nil.
func appendBin(b, x []byte) []byte {
	if x == nil {
		return append(b, 0xc0)
	}
	return append(appendBinHeader(b, len(x)), x...)
}

// appendBinOf writes, as a bin field, the bytes fill appends to b: they
// are written once, in place, and the header is sized after them. A bin8
// header is reserved (payloads are mostly short) and widened when they are
// not, by moving them up.
func appendBinOf(b []byte, fill func([]byte) []byte) []byte {
	at := len(b)
	b = fill(append(b, 0xc4, 0))
	n := len(b) - at - 2
	if n < 1<<8 {
		b[at+1] = byte(n)
		return b
	}
	wider := binHeaderLen(n) - 2
	b = append(b, make([]byte, wider)...)
	copy(b[at+2+wider:], b[at+2:at+2+n])
	appendBinHeader(b[:at], n) // rewrites b[at:at+2+wider] in place
	return b
}

// appendMapLen writes a map header.
func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xde, byte(n>>8), byte(n))
	}
	return append(b, 0xdf, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

// mapLen reads a map header; nil is -1.
func (m *msgpReader) mapLen() int {
	switch c := m.code(); {
	case m.err != nil:
	case c == 0xc0:
		return -1
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f)
	case c == 0xde:
		return int(m.be(2))
	case c == 0xdf:
		return int(m.be(4))
	default:
		m.failCode(c, "a map")
	}
	return 0
}

// frame turns a payload appended after headerLen reserved bytes into a
// framed value: the format byte and the payload's CRC.
func frame(out []byte) []byte {
	out[0] = valueFormatV1
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(out[headerLen:], castagnoli))
	return out
}
