package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// decodeTurn names the field where a damaged turn stops decoding, so a
// report points at the byte that is wrong.

func TestDecodeTurnReasons(t *testing.T) {
	// fields of a sound turn, in order; a case replaces one of them.
	fields := func() [][]byte {
		return [][]byte{
			appendStr(nil, "act"),
			append(appendBinHeader(nil, 4), 1, 0, 0, 0),
			append(appendBinHeader(nil, 4), 0, 0, 0x80, 0xbe),
			appendStr(nil, "obs"),
			append(appendBinHeader(nil, 8), 1, 0, 0, 0, 2, 0, 0, 0),
			appendFloat64(nil, 0.5),
			appendBool(nil, true),
		}
	}
	value := func(n int, fs [][]byte) []byte {
		p := appendArrayLen(nil, n)
		for _, f := range fs {
			p = append(p, f...)
		}
		return framed(p)
	}
	sound := fields()
	var got model.Turn
	if err := decodeTurn("turns", nil, value(len(sound), sound), &got); err != nil || got.Observation != "obs" || !got.Done || got.ActionLogprobs[0] != -0.25 {
		t.Fatalf("sound turn: %+v, %v", got, err)
	}
	names := []string{"action", "action tokens", "action logprobs", "observation", "observation tokens", "reward", "done"}
	for i, name := range names {
		// A byte no msgpack value starts with, in place of field i.
		fs := fields()
		fs[i] = []byte{0xc1}
		wantReason(t, value(len(fs), fs), "turn: "+name+": ")
		// Field i missing: the value ends there.
		wantReason(t, value(len(sound), fields()[:i]), "turn: "+name+": ")
	}
	// Token arrays must be whole 4-byte words.
	for i, name := range map[int]string{1: "action tokens", 2: "action logprobs", 4: "observation tokens"} {
		fs := fields()
		fs[i] = append(appendBinHeader(nil, 3), 1, 2, 3)
		wantReason(t, value(len(fs), fs), "turn: "+name+" length not a multiple of 4")
	}
	// Not an array of the turn's field count, or no array at all.
	wantReason(t, value(len(sound)-1, sound[:len(sound)-1]), "turn: not a ")
	wantReason(t, framed(appendStr(nil, "turn")), "turn: not a ")
}

func wantReason(t *testing.T, raw []byte, prefix string) {
	t.Helper()
	var tn model.Turn
	err := decodeTurn("turns", []byte("k"), raw, &tn)
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(ce.Reason, prefix) || string(ce.Key) != "k" {
		t.Errorf("decodeTurn(% x) = %v, want ErrCorrupt with a reason starting %q", raw, err, prefix)
	}
}
