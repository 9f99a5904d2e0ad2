package batch

import (
	"slices"
	"testing"
)

// repeatInto must write exactly dst, whatever its length against the
// run's: empty, shorter, equal, longer by one, several runs and a tail.
func TestRepeatInto(t *testing.T) {
	run := []int32{7, 8, 9}
	for _, n := range []int{0, 1, 2, 3, 4, 6, 7, 11} {
		buf := make([]int32, n+2)
		repeatInto(buf[1:n+1], run)
		want := make([]int32, n+2)
		for i := range n {
			want[i+1] = run[i%3]
		}
		if !slices.Equal(buf, want) {
			t.Errorf("n=%d: %v, want %v", n, buf, want)
		}
	}
	if !slices.Equal(run, []int32{7, 8, 9}) {
		t.Errorf("the run changed: %v", run)
	}
}

// The blocks must be 1 MiB at least, the size from which copy streams.
func TestZeroBlocksAreWide(t *testing.T) {
	if len(zeroBytes()) < 1<<20 || 4*len(zeroFloats()) < 1<<20 {
		t.Errorf("zero blocks of %d and %d bytes, want 1 MiB each", len(zeroBytes()), 4*len(zeroFloats()))
	}
}
