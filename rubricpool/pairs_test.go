package rubricpool

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestPairSet(t *testing.T) {
	tests := []struct {
		order []int
		want  [][2]int
	}{
		{nil, nil},
		{[]int{4}, nil},
		{[]int{1, 0}, [][2]int{{1, 0}}},
		{[]int{2, 0, 1}, [][2]int{{2, 0}, {0, 1}, {2, 1}}},
		{[]int{3, 1, 0, 2}, [][2]int{{3, 1}, {1, 0}, {0, 2}, {3, 2}}},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, [][2]int{
			{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 7}, {0, 7},
		}},
	}
	for _, tt := range tests {
		got := PairSet(tt.order)
		if !slices.Equal(got, tt.want) {
			t.Errorf("PairSet(%v) = %v, want %v", tt.order, got, tt.want)
		}
	}
}

// Every trajectory is compared at least once, no pair repeats, and a group
// of n never costs more than n judge calls.
func TestPairSetProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 64).Draw(t, "n")
		order := rapid.Permutation(rangeInts(n)).Draw(t, "order")
		pairs := PairSet(order)
		if len(pairs) > n {
			t.Fatalf("%d pairs for n=%d", len(pairs), n)
		}
		want := n // n−1 neighbours plus the diameter
		switch {
		case n < 2:
			want = 0
		case n == 2:
			want = 1 // the diameter is the only neighbour pair
		}
		if len(pairs) != want {
			t.Fatalf("%d pairs for n=%d, want %d", len(pairs), n, want)
		}
		seen := map[[2]int]bool{}
		covered := map[int]bool{}
		for _, p := range pairs {
			if p[0] == p[1] {
				t.Fatalf("self pair %v", p)
			}
			k := [2]int{min(p[0], p[1]), max(p[0], p[1])}
			if seen[k] {
				t.Fatalf("repeated pair %v in %v", p, pairs)
			}
			seen[k] = true
			covered[p[0]], covered[p[1]] = true, true
		}
		if n >= 2 && len(covered) != n {
			t.Fatalf("covered %d of %d", len(covered), n)
		}
	})
}

func rangeInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
