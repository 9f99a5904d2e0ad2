package store

// Token arrays are packed little-endian whatever the host: the memory copy
// used on little-endian hosts and the word-by-word path used elsewhere
// must write and read the same bytes.

import (
	"bytes"
	"math"
	"testing"
)

func TestPackBothPaths(t *testing.T) {
	u := []uint32{0, 1, 0x01020304, math.MaxUint32}
	f := []float32{0, -0.25, float32(math.Inf(-1)), math.MaxFloat32}
	wantU := []byte{0, 0, 0, 0, 1, 0, 0, 0, 4, 3, 2, 1, 0xff, 0xff, 0xff, 0xff}
	defer func(h bool) { littleEndianHost = h }(littleEndianHost)
	for _, host := range []bool{true, false} {
		littleEndianHost = host
		pu := packU32([]byte{9}, u)
		if !bytes.Equal(pu, append([]byte{9}, wantU...)) {
			t.Errorf("little-endian host %t: packU32 = % x", host, pu)
		}
		gotU, ok := unpackU32(pu[1:])
		if !ok || !slicesEqual(gotU, u) {
			t.Errorf("little-endian host %t: unpackU32 = %v %t", host, gotU, ok)
		}
		pf := packF32(nil, f)
		if len(pf) != 16 || pf[7] != 0xbe || pf[11] != 0xff {
			t.Errorf("little-endian host %t: packF32 = % x", host, pf)
		}
		gotF, ok := unpackF32(pf)
		if !ok || len(gotF) != len(f) {
			t.Fatalf("little-endian host %t: unpackF32 = %v %t", host, gotF, ok)
		}
		for i := range f {
			if gotF[i] != f[i] {
				t.Errorf("little-endian host %t: float %d = %v, want %v", host, i, gotF[i], f[i])
			}
		}
		if got := packU32([]byte{7}, nil); !bytes.Equal(got, []byte{7}) {
			t.Errorf("little-endian host %t: packU32 of nothing = % x", host, got)
		}
		if got := packF32([]byte{7}, nil); !bytes.Equal(got, []byte{7}) {
			t.Errorf("little-endian host %t: packF32 of nothing = % x", host, got)
		}
		for _, n := range []int{1, 2, 3, 5} {
			if _, ok := unpackU32(make([]byte, n)); ok {
				t.Errorf("little-endian host %t: unpackU32 of %d bytes accepted", host, n)
			}
			if _, ok := unpackF32(make([]byte, n)); ok {
				t.Errorf("little-endian host %t: unpackF32 of %d bytes accepted", host, n)
			}
		}
		if got, ok := unpackU32(nil); got != nil || !ok {
			t.Errorf("little-endian host %t: unpackU32(nil) = %v %t", host, got, ok)
		}
		if got, ok := unpackF32([]byte{}); got != nil || !ok {
			t.Errorf("little-endian host %t: unpackF32 of nothing = %v %t", host, got, ok)
		}
	}
}

func slicesEqual(a, b []uint32) bool { return bytes.Equal(packU32(nil, a), packU32(nil, b)) }

func TestCloneBytes(t *testing.T) {
	if cloneBytes(nil) != nil {
		t.Error("cloneBytes(nil) is not nil")
	}
	src := []byte{1, 2, 3}
	c := cloneBytes(src)
	src[0] = 9
	if !bytes.Equal(c, []byte{1, 2, 3}) {
		t.Errorf("cloneBytes shares memory: %v", c)
	}
	if e := cloneBytes([]byte{}); e == nil || len(e) != 0 {
		t.Errorf("cloneBytes of an empty slice = %v", e)
	}
}
