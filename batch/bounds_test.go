package batch

import (
	"encoding/binary"
	"math"
	"testing"
)

// A token id of 2^31 or more anywhere in a turn's ids — whatever their
// number, in the words tested together or in the last odd one — is found
// (the batch is then refused rather than written wrapped), and ids up to
// 2^31−1 pass.
func TestIDsFit(t *testing.T) {
	for n := 0; n <= 41; n++ {
		b := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(b[4*i:], math.MaxInt32)
		}
		if !idsFit(b) {
			t.Fatalf("%d ids of 2^31-1: refused", n)
		}
		if j, _ := firstWideBytes(b); j != -1 {
			t.Fatalf("%d ids of 2^31-1: id %d named wide", n, j)
		}
		for p := range n {
			for _, wide := range []uint32{1 << 31, math.MaxUint32} {
				c := append([]byte(nil), b...)
				binary.LittleEndian.PutUint32(c[4*p:], wide)
				if idsFit(c) {
					t.Fatalf("%d ids, %d at %d: passed", n, wide, p)
				}
				if j, id := firstWideBytes(c); j != p || id != wide {
					t.Fatalf("%d ids, %d at %d: first wide %d (%d)", n, wide, p, j, id)
				}
			}
		}
	}
	if i, ok := firstWide([]uint32{1, math.MaxInt32, 1 << 31, 1 << 31}); !ok || i != 2 {
		t.Errorf("firstWide: %d, %v; want 2", i, ok)
	}
	if _, ok := firstWide([]uint32{1, math.MaxInt32}); ok {
		t.Errorf("firstWide found a wide id among narrow ones")
	}
}
