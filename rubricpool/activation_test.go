package rubricpool

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func corrOf(xs, ys []float64) Corr {
	var c Corr
	c.AddAll(xs, ys)
	return c
}

var (
	rhoHigh  = corrOf([]float64{0, 1, 2}, []float64{0, 1, 2})       // 1
	rhoMid   = corrOf([]float64{0, 1, 2, 3}, []float64{0, 1, 0, 1}) // 1/√5
	rhoLow   = corrOf([]float64{0, 1, 2}, []float64{2, 1, 0})       // −1
	rhoUndef = corrOf([]float64{1, 1, 1}, []float64{0, 1, 2})       // constant x
)

func TestSelectActive(t *testing.T) {
	u := func(id uint64, c Corr, last int64) RubricUsage {
		return RubricUsage{ID: id, Corr: c, LastActivation: last}
	}
	tests := []struct {
		name   string
		pool   []RubricUsage
		active int
		want   []uint64
	}{
		{"empty pool", nil, 2, nil},
		{"active zero", []RubricUsage{u(1, rhoHigh, 0)}, 0, nil},
		{"one rubric", []RubricUsage{u(1, rhoHigh, 0)}, 2, []uint64{1}},
		{
			"best correlation first, then never-activated",
			[]RubricUsage{u(1, rhoMid, 3), u(2, rhoHigh, 9), u(3, rhoLow, 5), u(4, rhoUndef, -1)},
			2, []uint64{2, 4},
		},
		{
			"then oldest activation",
			[]RubricUsage{u(1, rhoMid, 3), u(2, rhoHigh, 9), u(3, rhoLow, 5)},
			2, []uint64{2, 1},
		},
		{
			"full order with four slots",
			[]RubricUsage{u(5, rhoLow, 7), u(2, rhoHigh, 9), u(3, rhoMid, 2), u(4, rhoUndef, -1), u(1, rhoUndef, -1)},
			4, []uint64{2, 1, 4, 3},
		},
		{
			"correlation tie goes to lowest id",
			[]RubricUsage{u(7, rhoHigh, 1), u(3, rhoHigh, 8), u(5, rhoMid, 0)},
			2, []uint64{3, 5},
		},
		{
			"undefined correlation loses to any defined one, even -1",
			[]RubricUsage{u(1, rhoUndef, 0), u(2, rhoLow, 4)},
			1, []uint64{2},
		},
		{
			"all undefined: lowest id, then LRU",
			[]RubricUsage{u(9, Corr{}, 4), u(3, rhoUndef, 6), u(6, Corr{}, 1)},
			2, []uint64{3, 6},
		},
		{
			"LRU tie goes to lowest id",
			[]RubricUsage{u(1, rhoHigh, 0), u(8, rhoLow, 2), u(4, rhoLow, 2)},
			2, []uint64{1, 4},
		},
		{
			"any negative step means never",
			[]RubricUsage{u(1, rhoHigh, 0), u(2, rhoLow, 0), u(3, rhoLow, -7)},
			2, []uint64{1, 3},
		},
		{
			"repeated id counted once",
			[]RubricUsage{u(1, rhoHigh, 0), u(1, rhoHigh, 0), u(2, rhoLow, 5)},
			2, []uint64{1, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.pool)
			got := SelectActive(tt.pool, tt.active)
			if !slices.Equal(got, tt.want) {
				t.Errorf("SelectActive = %v, want %v", got, tt.want)
			}
			if !slices.Equal(in, tt.pool) {
				t.Error("SelectActive modified its input")
			}
		})
	}
}

// Simulating the rotation: with fixed correlations, the exploit slot stays
// on the best rubric and the second slot visits every other rubric in turn.
func TestSelectActiveRotates(t *testing.T) {
	pool := []RubricUsage{
		{ID: 10, Corr: rhoHigh, LastActivation: -1},
		{ID: 20, Corr: rhoMid, LastActivation: -1},
		{ID: 30, Corr: rhoLow, LastActivation: -1},
		{ID: 40, Corr: rhoUndef, LastActivation: -1},
	}
	var seconds []uint64
	for step := range int64(6) {
		ids := SelectActive(pool, 2)
		if ids[0] != 10 {
			t.Fatalf("step %d: exploit pick %d", step, ids[0])
		}
		seconds = append(seconds, ids[1])
		for i := range pool {
			if slices.Contains(ids, pool[i].ID) {
				pool[i].LastActivation = step
				pool[i].Activations++
			}
		}
	}
	if want := []uint64{20, 30, 40, 20, 30, 40}; !slices.Equal(seconds, want) {
		t.Errorf("rotation %v, want %v", seconds, want)
	}
}

func TestSelectActiveProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 10).Draw(t, "n")
		corrs := []Corr{rhoHigh, rhoMid, rhoLow, rhoUndef, {}}
		pool := make([]RubricUsage, n)
		ids := rapid.SliceOfNDistinct(rapid.Uint64Range(0, 30), n, n, rapid.ID[uint64]).Draw(t, "ids")
		for i := range pool {
			pool[i] = RubricUsage{
				ID:             ids[i],
				Corr:           corrs[rapid.IntRange(0, len(corrs)-1).Draw(t, "c")],
				LastActivation: rapid.Int64Range(-1, 5).Draw(t, "last"),
			}
		}
		active := rapid.IntRange(0, 12).Draw(t, "active")
		got := SelectActive(pool, active)
		if want := min(max(active, 0), n); len(got) != want {
			t.Fatalf("%d ids, want %d", len(got), want)
		}
		seen := map[uint64]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("repeated id %d", id)
			}
			seen[id] = true
		}
		perm := rapid.Permutation(pool).Draw(t, "perm")
		if again := SelectActive(perm, active); !slices.Equal(again, got) {
			t.Fatalf("order dependent: %v vs %v", got, again)
		}
	})
}
