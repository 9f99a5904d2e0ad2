package model

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// Token ids and logprobs are packed as little-endian 4-byte words, in the
// file and on the packed wire alike.

// littleEndianHost lets token arrays be copied as memory instead of one
// element at a time; the packed format is little-endian either way.
var littleEndianHost = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// AppendWords appends the little-endian bytes of xs to dst: the packing
// of token ids in the file and on the packed wire.
func AppendWords(dst []byte, xs []uint32) []byte {
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

// Words decodes little-endian uint32s; ok is false when len(b) is not a
// multiple of 4.
func Words(b []byte) ([]uint32, bool) {
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

// WordsView is Words sharing b's memory when the host is little-endian and
// b 4-byte aligned (a copy otherwise): b must not change while the words
// are in use.
func WordsView(b []byte) ([]uint32, bool) {
	if len(b)%4 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return nil, true
	}
	if littleEndianHost && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4), true
	}
	return Words(b)
}

// FloatsView is Floats sharing b's memory as WordsView does.
func FloatsView(b []byte) ([]float32, bool) {
	u, ok := WordsView(b)
	if !ok || u == nil {
		return nil, ok
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&u[0])), len(u)), true
}

// AppendFloats appends the little-endian bytes of xs to dst: the packing
// of logprobs.
func AppendFloats(dst []byte, xs []float32) []byte {
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

// Floats decodes little-endian float32s; ok is false when len(b) is not a
// multiple of 4.
func Floats(b []byte) ([]float32, bool) {
	u, ok := Words(b)
	if !ok || u == nil {
		return nil, ok
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&u[0])), len(u)), true
}
