package store

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
	"unsafe"

	"github.com/patrdb/patrdb/model"
)

// validTurn is the rule every stored turn keeps: text is valid UTF-8 (a
// JSON or Parquet reader would otherwise get U+FFFD in its place), the
// reward is finite, token ids are at most MaxTokenID, and the logprobs,
// when given, are one finite value <= 0 per action token (a trainer
// computes importance ratios from them).
//
// It reads every byte of text and every logprob appended: tested value
// by value it was nearly a quarter of the instructions patrdb spends
// beyond raw bbolt on a ~1 KB step commit (BenchmarkMatrixCommits). So
// the common case is tested a word at a time, and only a turn that fails
// is looked at value by value, to name what is wrong.
func validTurn(t *model.Turn) error {
	switch {
	case !validUTF8(t.Action):
		return invalidf("action text is not valid UTF-8")
	case !validUTF8(t.Observation):
		return invalidf("observation text is not valid UTF-8")
	case !finite(t.Reward):
		return invalidf("reward %v is not finite", t.Reward)
	case !tokenIDsFit(t.ActionTokens):
		return validTokenIDs("action token", t.ActionTokens)
	case !tokenIDsFit(t.ObservationTokens):
		return validTokenIDs("observation token", t.ObservationTokens)
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
// 32-bit lane, adding 0x00800000 to a magnitude whose exponent is all
// ones (infinity, NaN) carries into the sign bit, and so does adding
// 0x7fffffff to any nonzero magnitude, which is kept only where the sign
// bit is clear (a positive value). Neither sum reaches the next lane.
func logprobsValid(lps []float32) bool {
	n := 4 * len(lps)
	switch n {
	case 0:
		return true
	case 4:
		return logprobValid(lps[0])
	}
	p := unsafe.Pointer(unsafe.SliceData(lps))
	var bad uint64
	i := 0
	for ; i <= n-32; i += 32 {
		bad |= badLogprobs(word(p, i)) | badLogprobs(word(p, i+8)) | badLogprobs(word(p, i+16)) | badLogprobs(word(p, i+24))
	}
	for ; i <= n-8; i += 8 {
		bad |= badLogprobs(word(p, i))
	}
	// The last word again, which holds the odd logprob out if there is one.
	bad |= badLogprobs(word(p, n-8))
	return bad&0x80000000_80000000 == 0
}

// badLogprobs sets the sign bit of each 32-bit lane of x that holds a
// logprob logprobValid refuses (see logprobsValid).
func badLogprobs(x uint64) uint64 {
	const (
		magnitude = 0x7fffffff_7fffffff
		expOne    = 0x00800000_00800000
	)
	m := x & magnitude
	return (m + expOne) | ^x&(m+magnitude)
}

// validUTF8 is utf8.ValidString, faster on text that is all ASCII, as
// most of an agent's is: it ORs the bytes together a word at a time and
// tests their high bits once, and decodes rune by rune only text that
// has a byte outside ASCII.
func validUTF8(s string) bool {
	n := len(s)
	var or uint64
	if n < 8 {
		for i := range n {
			or |= uint64(s[i])
		}
	} else {
		or = orWords(unsafe.Pointer(unsafe.StringData(s)), n)
	}
	return or&0x80808080_80808080 == 0 || utf8.ValidString(s)
}

// orWords ORs together the n >= 8 bytes at p, a word at a time, four
// words an iteration; the last word is read again, which holds the bytes
// the loops left.
func orWords(p unsafe.Pointer, n int) uint64 {
	var or uint64
	i := 0
	for ; i <= n-32; i += 32 {
		or |= word(p, i) | word(p, i+8) | word(p, i+16) | word(p, i+24)
	}
	for ; i <= n-8; i += 8 {
		or |= word(p, i)
	}
	return or | word(p, n-8)
}

// word reads the eight bytes at p+i, which must all lie inside one
// allocation; they need not be aligned.
func word(p unsafe.Pointer, i int) uint64 {
	return binary.NativeEndian.Uint64((*[8]byte)(unsafe.Add(p, i))[:])
}
