package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Value framing. Every value in the file is
//
//	| format (1 byte) | CRC32C of payload (4 bytes, big-endian) | msgpack payload |
//
// bbolt checksums only its meta pages, so the CRC is the only thing that
// notices a damaged data page.
const (
	valueFormatV1 = 1
	headerLen     = 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodeValue frames v. The returned slice is freshly allocated: bbolt keeps
// a reference to it until the transaction ends.
func encodeValue(v any) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	buf.Write([]byte{valueFormatV1, 0, 0, 0, 0})
	enc := msgpack.GetEncoder()
	enc.Reset(buf)
	enc.UseCompactInts(true)
	// Maps (Run, Group and Checkpoint Meta) in key order: Go's map order is
	// random, and the same record must encode to the same bytes.
	enc.SetSortMapKeys(true)
	err := enc.Encode(v)
	msgpack.PutEncoder(enc)
	if err != nil {
		return nil, err
	}
	out := make([]byte, buf.Len())
	copy(out, buf.Bytes())
	binary.BigEndian.PutUint32(out[1:5], crc32.Checksum(out[headerLen:], castagnoli))
	return out, nil
}

// decodeValue checks the frame of raw and decodes the payload into v. The
// bucket and key only label the error.
func decodeValue(bucket string, key, raw []byte, v any) error {
	payload, err := checkCRC(bucket, key, raw)
	if err != nil {
		return err
	}
	// Events, nodes, groups, advantages and EvTurns payloads in canonical form
	// (codec_records.go): their decoders check every length as they read, so
	// they need no msgpackFits walk first.
	if decodeFast(payload, v) {
		return nil
	}
	if !msgpackFits(payload) {
		return errLengthExceeds(bucket, key)
	}
	if err := msgpack.Unmarshal(payload, v); err != nil {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "decode: " + err.Error()}
	}
	return nil
}

// checkFrame is what a value must pass before msgpack/v5 decodes it: its
// frame (checkCRC), and every length inside it bounded by its size
// (msgpackFits).
func checkFrame(bucket string, key, raw []byte) ([]byte, error) {
	payload, err := checkCRC(bucket, key, raw)
	if err == nil && !msgpackFits(payload) {
		return nil, errLengthExceeds(bucket, key)
	}
	return payload, err
}

func errLengthExceeds(bucket string, key []byte) error {
	return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "decode: a length exceeds the value"}
}

// checkCRC checks a value's format byte and CRC and returns its payload,
// for the hand-written decoders (msgp.go), which bound every length by the
// payload as they read it.
func checkCRC(bucket string, key, raw []byte) ([]byte, error) {
	if len(raw) < headerLen {
		return nil, &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "value shorter than its header"}
	}
	if raw[0] != valueFormatV1 {
		return nil, &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "unknown value format byte"}
	}
	payload := raw[headerLen:]
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(raw[1:5]) {
		return nil, &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "CRC32C mismatch"}
	}
	return payload, nil
}

// msgpackFits reports whether the first msgpack object in b, and every
// string, binary, extension, array and map inside it, fits in b. msgpack
// allocates what a header claims before it reads (a 4 GB bin32 header makes
// a 4 GB slice, and its pooled decoders keep their buffers), so a short
// damaged value could exhaust memory; after this walk every allocation is
// bounded by the value's size. It allocates nothing and reads each header
// once.
func msgpackFits(b []byte) bool {
	pos, pending := 0, 1 // objects still to read
	for pending > 0 {
		// Every object takes at least one byte.
		if pending > len(b)-pos {
			return false
		}
		c := b[pos]
		pos++
		pending--
		var n, size int // n: objects it contains; size: bytes after the header
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		case c >= 0x80 && c <= 0x8f:
			n = 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f:
			n = int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf:
			size = int(c & 0x1f)
		default:
			// Headers with a length or a fixed size: how many length bytes
			// follow, and the fixed size or extension type byte.
			var lenBytes, fixed int
			switch c {
			case 0xc4, 0xd9: // bin8, str8
				lenBytes = 1
			case 0xc5, 0xda: // bin16, str16
				lenBytes = 2
			case 0xc6, 0xdb: // bin32, str32
				lenBytes = 4
			case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, then a type byte
				lenBytes, fixed = 1<<(c-0xc7), 1
			case 0xca, 0xce, 0xd2: // float32, uint32, int32
				fixed = 4
			case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
				fixed = 8
			case 0xcc, 0xd0: // uint8, int8
				fixed = 1
			case 0xcd, 0xd1: // uint16, int16
				fixed = 2
			case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16, after a type byte
				fixed = 1 + 1<<(c-0xd4)
			case 0xdc, 0xde: // array16, map16
				lenBytes = 2
			case 0xdd, 0xdf: // array32, map32
				lenBytes = 4
			default: // 0xc1 is never used
				return false
			}
			if lenBytes > len(b)-pos {
				return false
			}
			l := 0
			for _, x := range b[pos : pos+lenBytes] {
				l = l<<8 | int(x)
			}
			pos += lenBytes
			switch c {
			case 0xdc, 0xdd:
				n = l
			case 0xde, 0xdf:
				n = 2 * l
			default:
				size = l + fixed
			}
		}
		if size > len(b)-pos {
			return false
		}
		pos += size
		pending += n
	}
	return true
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
