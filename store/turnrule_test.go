package store

import (
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patrdb/patrdb/model"
	"pgregory.net/rapid"
)

// validUTF8 decides as utf8.ValidString does, whatever the length (every
// tail of its word loops) and wherever the one byte outside ASCII is.
func TestValidUTF8AgreesWithTheStandardLibrary(t *testing.T) {
	bad := []string{"\xff", "\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80"} // invalid, truncated, surrogate, past U+10FFFF
	good := []string{"é", "日本", "🙂"}
	for n := range 140 {
		ascii := strings.Repeat("a", n)
		for at := 0; at <= n; at++ {
			for _, b := range append(bad, good...) {
				s := ascii[:at] + b + ascii[at:]
				if got, want := validUTF8(s), utf8.ValidString(s); got != want {
					t.Fatalf("validUTF8(%q) = %v, utf8.ValidString %v", s, got, want)
				}
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		// Mostly ASCII, as text is, with now and then any byte at all.
		b := rapid.SliceOfN(rapid.OneOf(rapid.ByteRange(0, 0x7f), rapid.ByteRange(0, 0x7f), rapid.Byte()), 0, 300).Draw(rt, "text")
		if got, want := validUTF8(string(b)), utf8.ValidString(string(b)); got != want {
			rt.Fatalf("validUTF8(%q) = %v, utf8.ValidString %v", b, got, want)
		}
	})
}

// logprobsValid, which tests two logprobs a word, refuses exactly the
// slices in which logprobValid refuses a value: at every position, in
// slices of every length its loops treat differently.
func TestLogprobsValidAgreesWithTheRule(t *testing.T) {
	specials := []float32{
		0, float32(math.Copysign(0, -1)), -1, -math.MaxFloat32, -math.SmallestNonzeroFloat32,
		math.SmallestNonzeroFloat32, 1e-3, math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0xffc00000), math.Float32frombits(0x7f800001), math.Float32frombits(0xff800001),
	}
	for n := 1; n <= 11; n++ {
		for at := range n {
			for _, v := range specials {
				lps := make([]float32, n)
				for i := range lps {
					lps[i] = -0.5
				}
				lps[at] = v
				if got, want := logprobsValid(lps), logprobValid(v); got != want {
					t.Fatalf("logprobsValid with %v (bits %#x) at %d of %d = %v, want %v", v, math.Float32bits(v), at, n, got, want)
				}
			}
		}
	}
	if !logprobsValid(nil) {
		t.Error("no logprobs refused")
	}
	rapid.Check(t, func(rt *rapid.T) {
		bits := rapid.SliceOfN(rapid.Uint32(), 0, 40).Draw(rt, "bits")
		lps := make([]float32, len(bits))
		want := true
		for i, b := range bits {
			lps[i] = math.Float32frombits(b)
			want = want && logprobValid(lps[i])
		}
		if got := logprobsValid(lps); got != want {
			rt.Fatalf("logprobsValid(%v) = %v, want %v", lps, got, want)
		}
	})
}

// A turn that breaks the rule is refused naming the first logprob that
// does, as before the check went a word at a time.
func TestValidTurnNamesTheFirstBadLogprob(t *testing.T) {
	turn := model.Turn{ActionTokens: make([]uint32, 5), ActionLogprobs: []float32{-1, -2, 0.5, float32(math.NaN()), -1}}
	err := validTurn(&turn)
	if err == nil || !strings.Contains(err.Error(), "action logprob 2 is 0.5") {
		t.Fatalf("validTurn: %v, want logprob 2 named", err)
	}
}
