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

// WordsView and FloatsView read what Words and Floats read, sharing the
// bytes' memory where the host and the alignment allow (the frame reader's
// point) and copying elsewhere.
func TestViews(t *testing.T) {
	defer func(h bool) { littleEndianHost = h }(littleEndianHost)
	buf := make([]byte, 20) // 8-byte aligned: buf[4:] is aligned, buf[1:] not
	copy(buf[4:], AppendWords(nil, []uint32{7, 0x01020304}))
	for _, host := range []bool{true, false} {
		littleEndianHost = host
		for _, at := range []int{4, 1} {
			b := buf[at : at+8]
			want, _ := Words(b)
			got, ok := WordsView(b)
			f, fok := FloatsView(b)
			if !ok || !fok || !slices.Equal(got, want) || len(f) != 2 || math.Float32bits(f[1]) != want[1] {
				t.Fatalf("host little-endian %t, offset %d: %v %v, want %v", host, at, got, f, want)
			}
			b[0]++
			shared := got[0] != want[0]
			b[0]--
			if wantShared := host && at == 4; shared != wantShared {
				t.Errorf("host little-endian %t, offset %d: view shares the bytes: %t, want %t", host, at, shared, wantShared)
			}
		}
	}
	if _, ok := WordsView(buf[:3]); ok {
		t.Error("3 bytes read as words")
	}
}
