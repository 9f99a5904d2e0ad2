package model

// Token arrays are packed little-endian whatever the host: the memory copy
// used on little-endian hosts and the word-by-word path used elsewhere
// must write and read the same bytes.

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func TestPackBothPaths(t *testing.T) {
	u := []uint32{0, 1, 0x01020304, math.MaxUint32}
	f := []float32{0, -0.25, float32(math.Inf(-1)), math.MaxFloat32}
	wantU := []byte{0, 0, 0, 0, 1, 0, 0, 0, 4, 3, 2, 1, 0xff, 0xff, 0xff, 0xff}
	defer func(h bool) { littleEndianHost = h }(littleEndianHost)
	for _, host := range []bool{true, false} {
		littleEndianHost = host
		pu := AppendWords([]byte{9}, u)
		if !bytes.Equal(pu, append([]byte{9}, wantU...)) {
			t.Errorf("little-endian host %t: AppendWords = % x", host, pu)
		}
		gotU, ok := Words(pu[1:])
		if !ok || !slices.Equal(gotU, u) {
			t.Errorf("little-endian host %t: unAppendWords = %v %t", host, gotU, ok)
		}
		pf := AppendFloats(nil, f)
		if len(pf) != 16 || pf[7] != 0xbe || pf[11] != 0xff {
			t.Errorf("little-endian host %t: AppendFloats = % x", host, pf)
		}
		gotF, ok := Floats(pf)
		if !ok || len(gotF) != len(f) {
			t.Fatalf("little-endian host %t: unAppendFloats = %v %t", host, gotF, ok)
		}
		for i := range f {
			if gotF[i] != f[i] {
				t.Errorf("little-endian host %t: float %d = %v, want %v", host, i, gotF[i], f[i])
			}
		}
		if got := AppendWords([]byte{7}, nil); !bytes.Equal(got, []byte{7}) {
			t.Errorf("little-endian host %t: AppendWords of nothing = % x", host, got)
		}
		if got := AppendFloats([]byte{7}, nil); !bytes.Equal(got, []byte{7}) {
			t.Errorf("little-endian host %t: AppendFloats of nothing = % x", host, got)
		}
		for _, n := range []int{1, 2, 3, 5} {
			if _, ok := Words(make([]byte, n)); ok {
				t.Errorf("little-endian host %t: unAppendWords of %d bytes accepted", host, n)
			}
			if _, ok := Floats(make([]byte, n)); ok {
				t.Errorf("little-endian host %t: unAppendFloats of %d bytes accepted", host, n)
			}
		}
		if got, ok := Words(nil); got != nil || !ok {
			t.Errorf("little-endian host %t: Words(nil) = %v %t", host, got, ok)
		}
		if got, ok := Floats([]byte{}); got != nil || !ok {
			t.Errorf("little-endian host %t: unAppendFloats of nothing = %v %t", host, got, ok)
		}
	}
}
