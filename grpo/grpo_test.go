package grpo_test

import (
	"math"
	"slices"
	"testing"

	"github.com/patrdb/patrdb/grpo"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestAdvantages(t *testing.T) {
	const eps = 1e-6
	tests := []struct {
		name     string
		rewards  []float64
		mean     float64
		std      float64
		zero     bool
		wantAdvs []float64
	}{
		// mean .5, population std .5: ±.5/.500001.
		{"binary", []float64{1, 0, 0, 1}, 0.5, 0.5, false, []float64{0.5 / (0.5 + eps), -0.5 / (0.5 + eps), -0.5 / (0.5 + eps), 0.5 / (0.5 + eps)}},
		// mean 1, deviations -1, 0, 2, 2, -3: std sqrt(18/5).
		{"spread", []float64{0, 1, 3, 3, -2}, 1, math.Sqrt(18.0 / 5), false, nil},
		{"all equal", []float64{0.25, 0.25, 0.25}, 0.25, 0, true, []float64{0, 0, 0}},
		{"all equal large", []float64{1e6, 1e6}, 1e6, 0, true, []float64{0, 0}},
		{"single", []float64{1}, 1, 0, true, []float64{0}},
		{"empty", nil, 0, 0, true, []float64{}},
	}
	for _, tc := range tests {
		a := grpo.Advantages(tc.rewards, eps)
		want := tc.wantAdvs
		if want == nil {
			want = make([]float64, len(tc.rewards))
			for i, r := range tc.rewards {
				want[i] = (r - tc.mean) / (tc.std + eps)
			}
		}
		if !near(a.Mean, tc.mean) || !near(a.Std, tc.std) || a.ZeroVariance != tc.zero || len(a.Adv) != len(want) {
			t.Errorf("%s: mean %v std %v zero %t (%d advs), want %v %v %t (%d)", tc.name, a.Mean, a.Std, a.ZeroVariance, len(a.Adv), tc.mean, tc.std, tc.zero, len(want))
			continue
		}
		for i := range want {
			if !near(a.Adv[i], want[i]) {
				t.Errorf("%s: A_%d = %v, want %v", tc.name, i, a.Adv[i], want[i])
			}
		}
	}
}

// TestAdvantagesExact pins values without a tolerance wider than rounding,
// including eps entering the denominator and a mean of equal inexact floats
// (three 0.1s) that must not become an advantage.
func TestAdvantagesExact(t *testing.T) {
	tests := []struct {
		name      string
		rewards   []float64
		eps       float64
		mean, std float64
		adv       []float64
		zero      bool
	}{
		{"empty", nil, 1e-6, 0, 0, []float64{}, true},
		{"single", []float64{0.7}, 1e-6, 0.7, 0, []float64{0}, true},
		{"all equal", []float64{1, 1, 1}, 1e-6, 1, 0, []float64{0, 0, 0}, true},
		{"all equal inexact", []float64{0.1, 0.1, 0.1}, 0, 0.1, 0, []float64{0, 0, 0}, true},
		{"two", []float64{0, 1}, 0, 0.5, 0.5, []float64{-1, 1}, false},
		{"four", []float64{1, 2, 3, 4}, 0, 2.5, math.Sqrt(1.25), []float64{
			-1.5 / math.Sqrt(1.25), -0.5 / math.Sqrt(1.25), 0.5 / math.Sqrt(1.25), 1.5 / math.Sqrt(1.25),
		}, false},
		{"eps", []float64{0, 1}, 0.5, 0.5, 0.5, []float64{-0.5, 0.5}, false},
		{"symmetric", []float64{-1, 1}, 0, 0, 1, []float64{-1, 1}, false},
	}
	for _, tt := range tests {
		a := grpo.Advantages(tt.rewards, tt.eps)
		if a.ZeroVariance != tt.zero || math.Abs(a.Mean-tt.mean) > 1e-15 || math.Abs(a.Std-tt.std) > 1e-15 || len(a.Adv) != len(tt.adv) {
			t.Errorf("%s: %+v, want mean %v std %v zero %v adv %v", tt.name, a, tt.mean, tt.std, tt.zero, tt.adv)
			continue
		}
		for i := range a.Adv {
			if math.Abs(a.Adv[i]-tt.adv[i]) > 1e-12 || (tt.zero && a.Adv[i] != 0) {
				t.Errorf("%s: Adv = %v, want %v", tt.name, a.Adv, tt.adv)
				break
			}
		}
	}
}

// TestAdvantagesNearConstant: the zero-variance cut is relative to the
// rewards' magnitude (floored at 1), at 1e-12 of it: rounding noise on a
// constant group is zero variance, a real spread of 1e-9 is signal. A
// zero-variance group reports std 0, whatever rounding left.
func TestAdvantagesNearConstant(t *testing.T) {
	const eps = 1e-6
	tests := []struct {
		name    string
		rewards []float64
		zero    bool
		std     float64 // for informative groups
	}{
		{"one ulp-scale step above 1", []float64{1, 1 + 1e-13}, true, 0},
		{"spread of 1e-9 at 0", []float64{0, 1e-9}, false, 5e-10},
		{"spread of 1e-9 around 0.5", []float64{0.5, 0.5, 0.5 + 1e-9}, false, math.Sqrt(2) / 3 * 1e-9},
		// The tolerance scales with |r|: 1e-7 apart at −1e6 is rounding
		// noise (and a variance formula that cancels large squares would
		// turn it into a spread of 1e-2).
		{"rounding noise at -1e6", []float64{-1e6, -1e6 + 1e-7}, true, 0},
		{"spread of 1e-3 at -1e6", []float64{-1e6, -1e6 + 1e-3}, false, 5e-4},
		// ... but never below 1e-12 absolute: tiny rewards are not rescaled.
		{"tiny rewards", []float64{1e-13, 2e-13}, true, 0},
		// Exactly at the tolerance (std 1e-12 with scale 1) is zero variance.
		{"std exactly at the tolerance", []float64{0, 2e-12}, true, 0},
	}
	for _, tc := range tests {
		a := grpo.Advantages(tc.rewards, eps)
		var sum float64
		for _, r := range tc.rewards {
			sum += r
		}
		if wantMean := sum / float64(len(tc.rewards)); a.Mean != wantMean {
			t.Errorf("%s: mean %v, want %v", tc.name, a.Mean, wantMean)
		}
		if a.ZeroVariance != tc.zero || len(a.Adv) != len(tc.rewards) {
			t.Errorf("%s: zero variance %t (%d advantages), want %t", tc.name, a.ZeroVariance, len(a.Adv), tc.zero)
			continue
		}
		if a.ZeroVariance {
			if a.Std != 0 {
				t.Errorf("%s: zero-variance group reports std %v, want 0", tc.name, a.Std)
			}
			for i, x := range a.Adv {
				if x != 0 {
					t.Errorf("%s: A_%d = %v in a zero-variance group", tc.name, i, x)
				}
			}
			continue
		}
		if math.Abs(a.Std-tc.std) > 1e-6*tc.std {
			t.Errorf("%s: std %v, want %v", tc.name, a.Std, tc.std)
		}
		for i, r := range tc.rewards {
			want := (r - a.Mean) / (a.Std + eps)
			if x := a.Adv[i]; x != want || x == 0 {
				t.Errorf("%s: A_%d = %v, want %v", tc.name, i, x, want)
			}
		}
	}
}

func TestAdvantagesPanicsOnBadEps(t *testing.T) {
	for _, eps := range []float64{-1e-9, math.NaN(), math.Inf(1)} {
		if grpo.ValidEps(eps) {
			t.Errorf("ValidEps(%v) = true", eps)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic for eps %v", eps)
				}
			}()
			grpo.Advantages([]float64{0, 1}, eps)
		}()
	}
	if !grpo.ValidEps(0) || !grpo.ValidEps(grpo.DefaultEps) {
		t.Error("ValidEps rejects 0 or DefaultEps")
	}
}

func TestVariance(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 0},
		{[]float64{0, 1}, 0.25},
		{[]float64{1, 2, 3, 4}, 1.25},
		{[]float64{0, 0, 1, 1}, 0.25},
		// The rubric buffer's VarMin boundary: 0.4/0.6 around 0.5 → 0.01.
		{[]float64{0.4, 0.6}, 0.01},
	}
	for _, tt := range tests {
		if got := grpo.Variance(tt.xs); math.Abs(got-tt.want) > 1e-15 {
			t.Errorf("Variance(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = 0.1
	}
	if v := grpo.Variance(xs); v > 1e-25 {
		t.Errorf("Variance of a constant = %v", v)
	}
}

func TestShape(t *testing.T) {
	// The case rubric shaping exists for: equal base rewards become
	// distinguishable.
	if got, want := grpo.Shape([]float64{1, 1, 1, 1}, []float64{0, 0, -0.25, 0.25}, 0.1), []float64{1, 1, 0.975, 1.025}; !slices.Equal(got, want) {
		t.Errorf("Shape = %v, want %v", got, want)
	}
	base := []float64{0.5, -1}
	if got := grpo.Shape(base, []float64{0.3, -0.3}, 0); !slices.Equal(got, base) || &got[0] == &base[0] {
		t.Errorf("Shape with lambda 0 = %v, want a copy of %v", got, base)
	}
	defer func() {
		if recover() == nil {
			t.Error("Shape with mismatched lengths did not panic")
		}
	}()
	grpo.Shape([]float64{1}, []float64{1, 2}, 0.1)
}
