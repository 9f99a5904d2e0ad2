package main

import (
	"slices"
	"testing"
)

func TestSpreadTakesTheMiddleOfEachStretch(t *testing.T) {
	ms := make([]mutant, 10)
	for i := range ms {
		ms[i].Line = i
	}
	lines := func(ms []mutant) []int {
		var out []int
		for _, m := range ms {
			out = append(out, m.Line)
		}
		return out
	}
	for n, want := range map[int][]int{
		0:  {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		1:  {5},
		2:  {2, 7},
		5:  {1, 3, 5, 7, 9},
		10: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		20: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	} {
		if got := lines(spread(ms, n)); !slices.Equal(got, want) {
			t.Errorf("spread of 10 to %d: lines %v, want %v", n, got, want)
		}
	}
}
