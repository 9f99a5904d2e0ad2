package batchdb

import (
	"slices"
	"testing"
)

// zeroWide must zero exactly s, whatever its length against the zero
// block's: empty, shorter, equal, longer by one, several blocks and a
// tail.
func TestZeroWide(t *testing.T) {
	zero := make([]int32, 4)
	for _, n := range []int{0, 1, 3, 4, 5, 8, 15} {
		buf := make([]int32, n+2)
		for i := range buf {
			buf[i] = int32(i + 1)
		}
		zeroWide(buf[1:n+1], zero)
		want := make([]int32, n+2)
		want[0], want[n+1] = 1, int32(n+2)
		if !slices.Equal(buf, want) {
			t.Errorf("n=%d: %v, want %v", n, buf, want)
		}
	}
	if !slices.Equal(zero, make([]int32, 4)) {
		t.Errorf("the zero block changed: %v", zero)
	}
}

// The blocks must be 1 MiB at least, the size from which copy streams.
func TestZeroBlocksAreWide(t *testing.T) {
	if len(zeroBytes()) < 1<<20 || 4*len(zeroFloats()) < 1<<20 {
		t.Errorf("zero blocks of %d and %d bytes, want 1 MiB each", len(zeroBytes()), 4*len(zeroFloats()))
	}
}
