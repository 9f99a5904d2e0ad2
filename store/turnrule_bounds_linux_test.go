package store

import (
	"math"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// guarded maps three pages and leaves only the middle one readable, so a
// read one byte before or past it faults: validUTF8 and logprobsValid read
// a word at a time through unsafe pointers, and must never read outside
// what they are given.
func guarded(t *testing.T) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	m, err := syscall.Mmap(-1, 0, 3*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	for _, guard := range [][]byte{m[:page], m[2*page:]} {
		if err := syscall.Mprotect(guard, syscall.PROT_NONE); err != nil {
			t.Skipf("mprotect: %v", err)
		}
	}
	return m[page : 2*page]
}

// Text and logprobs of every length the word loops treat differently,
// placed flush against the unreadable page on either side.
func TestTurnRuleReadsOnlyWhatItIsGiven(t *testing.T) {
	mem := guarded(t)
	for n := range 100 {
		for _, at := range []int{0, len(mem) - n} {
			text := mem[at : at+n]
			copy(text, strings.Repeat("a", n))
			if !validUTF8(unsafe.String(unsafe.SliceData(text), n)) {
				t.Fatalf("%d bytes of ASCII at offset %d refused", n, at)
			}
		}
	}
	for n := 1; n <= 25; n++ {
		for _, at := range []int{0, len(mem) - 4*n} {
			lps := unsafe.Slice((*float32)(unsafe.Pointer(&mem[at])), n)
			for i := range lps {
				lps[i] = -0.5
			}
			if !logprobsValid(lps) {
				t.Fatalf("%d valid logprobs at offset %d refused", n, at)
			}
		}
	}
}

// A bad value just outside the slice, in the same allocation, does not
// change the verdict: nothing past either end is read.
func TestLogprobsValidIgnoresItsNeighbours(t *testing.T) {
	for n := 1; n <= 25; n++ {
		backing := make([]float32, n+2)
		for i := range backing {
			backing[i] = -0.5
		}
		backing[0], backing[n+1] = float32(math.NaN()), 1
		if !logprobsValid(backing[1 : n+1]) {
			t.Fatalf("%d valid logprobs refused for the values beside them", n)
		}
	}
}
