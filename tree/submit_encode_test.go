package tree

import (
	"errors"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// EncodeSubmissions encodes, ahead of the transaction, exactly the turns
// Submit would otherwise encode inside it, and refuses a turn the store
// would refuse, naming the submission.
func TestEncodeSubmissions(t *testing.T) {
	turn := store.Turn{Action: "a", ActionTokens: []uint32{1, 2}, Observation: "o"}
	ahead, err := store.EncodeTurns(turn, turn, turn)
	if err != nil {
		t.Fatal(err)
	}
	subs := []Submission{
		{Node: 1, Turns: []store.Turn{turn, turn}},
		{Node: 2}, // a score alone: nothing to encode
		{Node: 3, Turns: []store.Turn{turn}, Encoded: ahead}, // encoded by the caller: kept
	}
	if err := EncodeSubmissions(subs); err != nil {
		t.Fatal(err)
	}
	if got := []int{subs[0].Encoded.Len(), subs[1].Encoded.Len(), subs[2].Encoded.Len()}; got[0] != 2 || got[1] != 0 || got[2] != 3 {
		t.Errorf("encoded turns per submission %v, want [2 0 3]", got)
	}
	bad := []Submission{{Node: 1, Turns: []store.Turn{turn}}, {Node: 7, Turns: []store.Turn{turn, {Action: "\xff"}}}}
	err = EncodeSubmissions(bad)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "submission 1 (node 7)") {
		t.Errorf("invalid turn: %v, want ErrInvalid naming submission 1 (node 7)", err)
	}
}
