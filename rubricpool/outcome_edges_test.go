package rubricpool

import (
	"math"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// A group with a non-finite outcome of either sign has no anchors: −Inf
// would otherwise always be picked as the worst.
func TestPickAnchorsRefusesInfiniteOutcomes(t *testing.T) {
	for _, bad := range []float64{math.Inf(-1), math.Inf(1), math.NaN()} {
		group := []Scored{{Node: 1, Outcome: 0.5}, {Node: 2, Outcome: bad}, {Node: 3, Outcome: 0}, {Node: 4, Outcome: 1}}
		if a, ok := PickAnchors(group); ok {
			t.Errorf("outcome %v: anchors %+v, want none", bad, a)
		}
	}
}

// The answer F1Outcome scores is the last turn's action, also when the
// trajectory has a single turn.
func TestF1OutcomeOfOneTurn(t *testing.T) {
	g := model.Group{Gold: "Paris"}
	if got := F1Outcome(g, []model.PathTurn{{Turn: model.Turn{Action: "paris"}}}); got != 1 {
		t.Errorf("one turn answering the gold: F1 %v, want 1", got)
	}
	if got := F1Outcome(g, nil); got != 0 {
		t.Errorf("no turns: F1 %v, want 0", got)
	}
}
