package rubricpool

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestPickAnchors(t *testing.T) {
	tests := []struct {
		name  string
		group []Scored
		want  Anchors
		ok    bool
	}{
		{"empty", nil, Anchors{}, false},
		{"two", []Scored{{1, 1}, {2, 0}}, Anchors{}, false},
		{
			"three distinct",
			[]Scored{{10, 0.5}, {11, 1}, {12, 0}},
			Anchors{Best: 11, Worst: 12, Hard: 10}, true,
		},
		{
			"hard is best of the rest",
			[]Scored{{1, 0.2}, {2, 0.9}, {3, 0.1}, {4, 0.7}, {5, 0.4}},
			Anchors{Best: 2, Worst: 3, Hard: 4}, true,
		},
		{
			"tie for best goes to lowest id, the other tied one is hard",
			[]Scored{{7, 1}, {3, 1}, {5, 0}, {9, 0.5}},
			Anchors{Best: 3, Worst: 5, Hard: 7}, true,
		},
		{
			"tie for worst goes to lowest id",
			[]Scored{{1, 1}, {8, 0}, {4, 0}, {6, 0.3}},
			Anchors{Best: 1, Worst: 4, Hard: 6}, true,
		},
		{
			"all equal: three lowest ids in order",
			[]Scored{{30, 0.5}, {10, 0.5}, {20, 0.5}, {40, 0.5}},
			Anchors{Best: 10, Worst: 20, Hard: 30}, true,
		},
		{
			"negative base rewards (invalid format = -1)",
			[]Scored{{1, -1}, {2, -1}, {3, 0.25}},
			Anchors{Best: 3, Worst: 1, Hard: 2}, true,
		},
		{"duplicate node", []Scored{{1, 1}, {1, 0}, {2, 0.5}}, Anchors{}, false},
		{"NaN outcome", []Scored{{1, 1}, {2, math.NaN()}, {3, 0.5}}, Anchors{}, false},
		{"Inf outcome", []Scored{{1, math.Inf(1)}, {2, 0}, {3, 0.5}}, Anchors{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := PickAnchors(tt.group)
			if ok != tt.ok || got != tt.want {
				t.Errorf("PickAnchors = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// The anchors must not depend on the order the group arrives in, and must
// satisfy their definitions.
func TestPickAnchorsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(3, 12).Draw(t, "n")
		ids := rapid.SliceOfNDistinct(rapid.Uint64Range(0, 50), n, n, rapid.ID[uint64]).Draw(t, "ids")
		group := make([]Scored, n)
		for i := range group {
			// Few distinct outcomes so ties are common.
			group[i] = Scored{ids[i], float64(rapid.IntRange(0, 3).Draw(t, "o")) / 3}
		}
		a, ok := PickAnchors(group)
		if !ok {
			t.Fatal("not ok")
		}
		perm := rapid.Permutation(group).Draw(t, "perm")
		if b, _ := PickAnchors(perm); b != a {
			t.Fatalf("order dependent: %+v vs %+v", a, b)
		}
		if a.Best == a.Worst || a.Best == a.Hard || a.Worst == a.Hard {
			t.Fatalf("anchors not distinct: %+v", a)
		}
		out := map[uint64]float64{}
		for _, s := range group {
			out[s.Node] = s.Outcome
		}
		// Reference: sort by (outcome desc, id asc); Best is first.
		sorted := slices.Clone(group)
		slices.SortFunc(sorted, func(x, y Scored) int {
			if x.Outcome != y.Outcome {
				if x.Outcome > y.Outcome {
					return -1
				}
				return 1
			}
			return cmp.Compare(x.Node, y.Node)
		})
		if a.Best != sorted[0].Node {
			t.Fatalf("best %d, want %d", a.Best, sorted[0].Node)
		}
		for _, s := range group {
			if s.Node == a.Best {
				continue
			}
			if s.Outcome < out[a.Worst] || (s.Outcome == out[a.Worst] && s.Node < a.Worst) {
				t.Fatalf("worst %d beaten by %d", a.Worst, s.Node)
			}
			if s.Node == a.Worst {
				continue
			}
			if s.Outcome > out[a.Hard] || (s.Outcome == out[a.Hard] && s.Node < a.Hard) {
				t.Fatalf("hard %d beaten by %d", a.Hard, s.Node)
			}
		}
	})
}
