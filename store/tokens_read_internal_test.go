package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/vmihailenco/msgpack/v5"
)

// Token arrays are packed 32-bit words: a stored turn whose action tokens,
// logprobs or observation tokens are not a whole number of words is
// corrupt for the zero-copy view as for the full decode, whichever array
// it is.
func TestTurnViewRefusesPartialTokenWords(t *testing.T) {
	word, odd := []byte{1, 2, 3, 4}, []byte{1, 2, 3, 4, 5, 6}
	for i, arrays := range [][3][]byte{{odd, word, word}, {word, odd, word}, {word, word, odd}} {
		payload, err := msgpack.Marshal([]any{"a", arrays[0], arrays[1], "o", arrays[2], 0.5, false, uint64(3)})
		if err != nil {
			t.Fatal(err)
		}
		raw := frameFor(payload)
		var v TurnView
		err = viewTurn("runs/r/turns", []byte{7}, raw, &v)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), string(errTokenLength)) {
			t.Errorf("array %d of 4n+2 bytes, viewed: %v, want corrupt for its length", i, err)
		}
		var tn model.Turn
		if err := decodeTurn("runs/r/turns", []byte{7}, raw, &tn); !errors.Is(err, ErrCorrupt) {
			t.Errorf("array %d of 4n+2 bytes, decoded: %v, want ErrCorrupt", i, err)
		}
	}
	payload, err := msgpack.Marshal([]any{"a", word, word, "o", word, 0.5, false, uint64(3)})
	if err != nil {
		t.Fatal(err)
	}
	var v TurnView
	if err := viewTurn("runs/r/turns", []byte{7}, frameFor(payload), &v); err != nil || len(v.ActionTokens) != 4 || v.PolicyVersion != 3 {
		t.Errorf("whole words: %+v, %v", v, err)
	}
}
