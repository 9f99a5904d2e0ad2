package batch_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
)

// A source that does not hold together is ErrSource before anything is
// built, the batch it was to be built into left as it was.
func TestAssembleRefusesASourceThatDoesNotHoldTogether(t *testing.T) {
	four := []byte{1, 0, 0, 0}
	sound := func() *batch.Source {
		return &batch.Source{
			Groups: []batch.SourceGroup{{ID: 1, PromptTokens: []uint32{5}}, {ID: 2}},
			Leaves: []batch.SourceLeaf{
				{ID: 3, Group: 0, Status: model.NodeCompleted, Path: []model.Segment{{Node: 3, Count: 1}}},
				{ID: 4, Group: 0, Status: model.NodePruned, Path: []model.Segment{{Node: 3, Count: 1}, {Node: 4, Count: 1}}},
				{ID: 6, Group: 1, Status: model.NodeFailed, Path: []model.Segment{{Node: 6, Count: 0}}},
			},
			Nodes: []model.Segment{{Node: 3, Count: 1}, {Node: 4, Count: 1}, {Node: 6, Count: 0}},
			Turns: []batch.SourceTurn{{ActionTokens: four, ActionLogprobs: four}, {ObservationTokens: four}},
		}
	}
	assemble := func(src *batch.Source) (batch.Batch, error) {
		b := batch.Batch{Run: "before"}
		err := batch.Assemble(&b, batch.Options{IncludeFailed: true}, func(batch.Options) (*batch.Source, error) { return src, nil })
		return b, err
	}
	if b, err := assemble(sound()); err != nil || b.Len() != 3 {
		t.Fatalf("the sound source: %d rows, %v", b.Len(), err)
	}
	for name, spoil := range map[string]func(*batch.Source){
		"a path through a node it lacks":   func(s *batch.Source) { s.Leaves[0].Path[0].Node = 9 },
		"a path taking more turns":         func(s *batch.Source) { s.Leaves[1].Path[1].Count = 2 },
		"a negative count":                 func(s *batch.Source) { s.Leaves[1].Path[1].Count = -1 },
		"a group index out of range":       func(s *batch.Source) { s.Leaves[2].Group = 2 },
		"leaves out of id order":           func(s *batch.Source) { s.Leaves[0].ID, s.Leaves[1].ID = 4, 3 },
		"a leaf id twice":                  func(s *batch.Source) { s.Leaves[1].ID = 3 },
		"groups out of order":              func(s *batch.Source) { s.Leaves[1].Group, s.Leaves[2].Group = 1, 0 },
		"a status no row has":              func(s *batch.Source) { s.Leaves[0].Status = model.NodeActive },
		"nodes out of order":               func(s *batch.Source) { s.Nodes[0].Node, s.Nodes[1].Node = 4, 3 },
		"nodes claiming more turns":        func(s *batch.Source) { s.Nodes[2].Count = 1 },
		"turns no node claims":             func(s *batch.Source) { s.Turns = append(s.Turns, batch.SourceTurn{}) },
		"a token array not whole words":    func(s *batch.Source) { s.Turns[1].ObservationTokens = []byte{1, 2} },
		"logprobs not one per action word": func(s *batch.Source) { s.Turns[0].ActionLogprobs = append(four, four...) },
	} {
		src := sound()
		spoil(src)
		b, err := assemble(src)
		if !errors.Is(err, batch.ErrSource) || b.Run != "before" {
			t.Errorf("%s: %v (run %q); want ErrSource and the batch untouched", name, err, b.Run)
		}
	}
}
