package store

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"sync"
	"unsafe"

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
	payload, err := checkFrame(bucket, key, raw)
	if err != nil {
		return err
	}
	if err := msgpack.Unmarshal(payload, v); err != nil {
		return &CorruptError{Bucket: bucket, Key: cloneBytes(key), Reason: "decode: " + err.Error()}
	}
	return nil
}

func checkFrame(bucket string, key, raw []byte) ([]byte, error) {
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

// littleEndianHost lets token arrays be copied as memory instead of one
// element at a time; the packed format is little-endian either way.
var littleEndianHost = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// packU32 appends the little-endian bytes of xs to dst.
func packU32(dst []byte, xs []uint32) []byte {
	if len(xs) == 0 {
		return dst
	}
	if littleEndianHost {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*4)...)
	}
	for _, x := range xs {
		dst = binary.LittleEndian.AppendUint32(dst, x)
	}
	return dst
}

// unpackU32 decodes little-endian uint32s; ok is false when len(b) is not a
// multiple of 4.
func unpackU32(b []byte) ([]uint32, bool) {
	if len(b)%4 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return nil, true
	}
	out := make([]uint32, len(b)/4)
	if littleEndianHost {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		return out, true
	}
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[i*4:])
	}
	return out, true
}

func packF32(dst []byte, xs []float32) []byte {
	if len(xs) == 0 {
		return dst
	}
	if littleEndianHost {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&xs[0])), len(xs)*4)...)
	}
	for _, x := range xs {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

func unpackF32(b []byte) ([]float32, bool) {
	u, ok := unpackU32(b)
	if !ok || u == nil {
		return nil, ok
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&u[0])), len(u)), true
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	return out
}
