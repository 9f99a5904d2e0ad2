package store

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
	"unsafe"
)

// validTurn is the rule every stored turn keeps: text is valid UTF-8 (a
// JSON or Parquet reader would otherwise get U+FFFD in its place), the
// reward is finite, and the logprobs, when given, are one finite value
// <= 0 per action token (a trainer computes importance ratios from them).
//
// It reads every byte of text and every logprob appended: tested value
// by value it was nearly a quarter of the instructions patrdb spends
// beyond raw bbolt on a ~1 KB step commit (BenchmarkMatrixCommits). So
// the common case is tested a word at a time, and only a turn that fails
// is looked at value by value, to name what is wrong.
func validTurn(t *Turn) error {
	switch {
	case !validUTF8(t.Action):
		return invalidf("action text is not valid UTF-8")
	case !validUTF8(t.Observation):
		return invalidf("observation text is not valid UTF-8")
	case !finite(t.Reward):
		return invalidf("reward %v is not finite", t.Reward)
	case len(t.ActionLogprobs) != 0 && len(t.ActionLogprobs) != len(t.ActionTokens):
		return invalidf("%d action logprobs for %d action tokens (give one per token, or none)", len(t.ActionLogprobs), len(t.ActionTokens))
	case !logprobsValid(t.ActionLogprobs):
		for i, lp := range t.ActionLogprobs {
			if !logprobValid(lp) {
				return invalidf("action logprob %d is %v; want a finite value <= 0", i, lp)
			}
		}
	}
	return nil
}

// logprobValid is the rule for one logprob: finite and <= 0 (NaN fails
// both comparisons).
func logprobValid(lp float32) bool { return lp <= 0 && lp >= -math.MaxFloat32 }

// logprobsValid reports whether every logprob keeps logprobValid,
// testing their bits two to a word, with no branch per value. In each
// 32-bit lane, adding 1 to an exponent of all ones (infinity, NaN)
// carries into the sign bit, and so does adding 0x7fffffff to any nonzero
// magnitude, which is kept only where the sign bit is clear (a positive
// value). Neither sum reaches the next lane.
func logprobsValid(lps []float32) bool {
	if len(lps) == 0 {
		return true
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&lps[0])), 4*len(lps))
	var bad uint64
	for ; len(b) >= 16; b = b[16:] {
		w := b[:16]
		bad |= badLogprobs(binary.NativeEndian.Uint64(w[:8])) | badLogprobs(binary.NativeEndian.Uint64(w[8:16]))
	}
	if len(b) >= 8 {
		bad |= badLogprobs(binary.NativeEndian.Uint64(b[:8]))
		b = b[8:]
	}
	if len(b) == 4 {
		bad |= badLogprobs(uint64(binary.NativeEndian.Uint32(b)))
	}
	return bad&0x80000000_80000000 == 0
}

// badLogprobs sets the sign bit of each 32-bit lane of x that holds a
// logprob logprobValid refuses (see logprobsValid).
func badLogprobs(x uint64) uint64 {
	const (
		exponents = 0x7f800000_7f800000
		expOne    = 0x00800000_00800000
		magnitude = 0x7fffffff_7fffffff
	)
	return (x&exponents + expOne) | ^x&(x&magnitude+magnitude)
}

// validUTF8 is utf8.ValidString, faster on text that is all ASCII, as
// most of an agent's is: it ORs the bytes together a word at a time and
// tests their high bits once, and decodes rune by rune only text that
// has a byte outside ASCII.
func validUTF8(s string) bool {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	var or uint64
	for ; len(b) >= 64; b = b[64:] {
		w := b[:64]
		or |= binary.NativeEndian.Uint64(w[0:8]) | binary.NativeEndian.Uint64(w[8:16]) |
			binary.NativeEndian.Uint64(w[16:24]) | binary.NativeEndian.Uint64(w[24:32]) |
			binary.NativeEndian.Uint64(w[32:40]) | binary.NativeEndian.Uint64(w[40:48]) |
			binary.NativeEndian.Uint64(w[48:56]) | binary.NativeEndian.Uint64(w[56:64])
	}
	for ; len(b) >= 8; b = b[8:] {
		or |= binary.NativeEndian.Uint64(b[:8])
	}
	for _, c := range b {
		or |= uint64(c)
	}
	return or&0x80808080_80808080 == 0 || utf8.ValidString(s)
}
