package view

import "testing"

// A Range starts at its first value whatever its sign: an all-negative
// set of advantages has a negative maximum, not 0.
func TestRangeOfNegativeValues(t *testing.T) {
	var r Range
	for _, x := range []float64{-1, -3, -2} {
		r.add(x)
	}
	if r.Count != 3 || r.Min != -3 || r.Max != -1 || r.Mean != -2 {
		t.Errorf("range of -1, -3, -2: %+v, want count 3, min -3, max -1, mean -2", r)
	}
	var p Range
	p.add(2)
	p.add(5)
	if p.Count != 2 || p.Min != 2 || p.Max != 5 || p.Mean != 3.5 {
		t.Errorf("range of 2, 5: %+v, want count 2, min 2, max 5, mean 3.5", p)
	}
}
