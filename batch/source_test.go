package batch_test

import (
	"errors"
	"math"
	"reflect"
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
		"a path through a node it lacks": func(s *batch.Source) { s.Leaves[0].Path[0].Node = 9 },
		"a path taking more turns":       func(s *batch.Source) { s.Leaves[1].Path[1].Count = 2 },
		"a negative count":               func(s *batch.Source) { s.Leaves[1].Path[1].Count = -1 },
		"a group index out of range":     func(s *batch.Source) { s.Leaves[2].Group = 2 },
		"leaves out of id order":         func(s *batch.Source) { s.Leaves[0].ID, s.Leaves[1].ID = 4, 3 },
		"a leaf id twice":                func(s *batch.Source) { s.Leaves[1].ID = 3 },
		"groups out of order":            func(s *batch.Source) { s.Leaves[1].Group, s.Leaves[2].Group = 1, 0 },
		"a status no row has":            func(s *batch.Source) { s.Leaves[0].Status = model.NodeActive },
		"nodes out of order":             func(s *batch.Source) { s.Nodes[0].Node, s.Nodes[1].Node = 4, 3 },
		"a node listed twice":            func(s *batch.Source) { s.Nodes = append(s.Nodes, s.Nodes[2]) },
		"a negative count made up for": func(s *batch.Source) {
			s.Nodes = []model.Segment{{Node: 3, Count: 1}, {Node: 4, Count: 1}, {Node: 5, Count: -1}, {Node: 6, Count: 1}}
		},
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

// A two-leaf step worked by hand: the rows batch carries, token by token,
// the values the package documentation's rules give (Repeat, TokenMean:
// every row trains its whole path with its leaf's advantage, w = 1/N).
// The leaves share their root's one turn, whose single action token
// carries its reward in both rows; leaf 4's advantage is exactly 1.
func TestAssembleByHand(t *testing.T) {
	le := func(xs ...uint32) []byte { return model.PackWords(xs) }
	lp := func(xs ...float32) []byte { return model.PackFloats(xs) }
	src := &batch.Source{Run: "r", Step: 1,
		Groups: []batch.SourceGroup{{ID: 2, PromptTokens: []uint32{5}}},
		Leaves: []batch.SourceLeaf{
			{ID: 4, Status: model.NodeCompleted, Reward: 1, Advantage: 1, Path: []model.Segment{{Node: 3, Count: 1}, {Node: 4, Count: 1}}},
			{ID: 6, Status: model.NodePruned, Advantage: -1, Path: []model.Segment{{Node: 3, Count: 1}, {Node: 6, Count: 1}}},
		},
		Nodes: []model.Segment{{Node: 3, Count: 1}, {Node: 4, Count: 1}, {Node: 6, Count: 1}},
		Turns: []batch.SourceTurn{
			{ActionTokens: le(7), ActionLogprobs: lp(-0.5), ObservationTokens: le(8), Reward: 0.25, PolicyVersion: 2},
			{ActionTokens: le(9, 10), ActionLogprobs: lp(-1, -2), PolicyVersion: 3},
			{ActionTokens: le(11), ObservationTokens: le(12), PolicyVersion: math.MaxInt64},
		},
	}
	var b batch.Batch
	if err := batch.Assemble(&b, batch.Options{}, func(batch.Options) (*batch.Source, error) { return src, nil }); err != nil {
		t.Fatal(err)
	}
	const w = float32(0.2) // 1/N, N = 3 + 2 trained tokens
	big := int64(math.MaxInt64)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"input_ids", b.InputIDs, []int32{5, 7, 8, 9, 10, 5, 7, 8, 11, 12}},
		{"loss_mask", b.LossMask, []uint8{0, 1, 0, 1, 1, 0, 1, 0, 1, 0}},
		{"old_logprobs", b.OldLogprobs, []float32{0, -0.5, 0, -1, -2, 0, -0.5, 0, 0, 0}},
		{"advantages", b.Advantages, []float32{0, 1, 0, 1, 1, 0, -1, 0, -1, 0}},
		{"positions", b.Positions, []int32{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}},
		{"coef_pos", b.CoefPos, []float32{0, w, 0, w, w, 0, 0, 0, 0, 0}},
		{"coef_neg", b.CoefNeg, []float32{0, 0, 0, 0, 0, 0, w, 0, w, 0}},
		{"loss_weight", b.LossWeight, []float32{0, w, 0, w, w, 0, w, 0, w, 0}},
		{"policy_versions", b.PolicyVersions, []int64{0, 2, 2, 3, 3, 0, 2, 2, big, big}},
		{"turn_index", b.TurnIndex, []int32{-1, 0, 0, 1, 1, -1, 0, 0, 1, 1}},
		{"turn_rewards", b.TurnRewards, []float32{0, 0.25, 0, 0, 0, 0, 0.25, 0, 0, 0}},
		{"row_offsets", b.RowOffsets, []int64{0, 5, 10}},
		{"row_policy_max", b.RowPolicyMax, []int64{3, big}},
		{"row_status", b.RowStatus, []uint8{batch.StatusCompleted, batch.StatusPruned}},
		{"figures", []int64{b.LossTokens, b.LossRows, b.TokensPacked, b.TokensMaterialised, b.ActionTokensWithoutLogprobs},
			[]int64{5, 2, 7, 10, 1}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// What the source's read returns as an error, Assemble returns, the
// batch left as it was.
func TestAssembleReturnsTheReadsError(t *testing.T) {
	refused := errors.New("the server went away")
	b := batch.Batch{Run: "before"}
	if err := batch.Assemble(&b, batch.Options{}, func(batch.Options) (*batch.Source, error) { return nil, refused }); err != refused || b.Run != "before" {
		t.Errorf("%v (run %q); want the read's error and the batch untouched", err, b.Run)
	}
}
