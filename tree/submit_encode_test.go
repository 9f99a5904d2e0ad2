package tree

import (
	"errors"
	"github.com/patrdb/patrdb/model"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/rollout"
)

// EncodeSubmissions encodes, ahead of the transaction, exactly the turns
// Submit would otherwise encode inside it, and refuses a turn the store
// would refuse, naming the submission.
func TestEncodeSubmissions(t *testing.T) {
	turn := model.Turn{Action: "a", ActionTokens: []uint32{1, 2}, Observation: "o"}
	subs := []rollout.Submission{
		{Node: 1, Turns: []model.Turn{turn, turn}},
		{Node: 2}, // a score alone: nothing to encode
		{Node: 3, Turns: []model.Turn{turn}},
	}
	enc, err := EncodeSubmissions(subs)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{enc[0].Len(), enc[1].Len(), enc[2].Len()}; len(enc) != 3 || got[0] != 2 || got[1] != 0 || got[2] != 1 {
		t.Errorf("encoded turns per submission %v, want [2 0 1]", got)
	}
	bad := []rollout.Submission{{Node: 1, Turns: []model.Turn{turn}}, {Node: 7, Turns: []model.Turn{turn, {Action: "\xff"}}}}
	_, err = EncodeSubmissions(bad)
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "submission 1 (node 7)") {
		t.Errorf("invalid turn: %v, want ErrInvalid naming submission 1 (node 7)", err)
	}
}
