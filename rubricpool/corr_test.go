package rubricpool

import (
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

func TestPearsonExact(t *testing.T) {
	tests := []struct {
		name   string
		xs, ys []float64
		want   float64
		ok     bool
	}{
		{"perfect", []float64{1, 2, 3}, []float64{2, 4, 6}, 1, true},
		{"perfect negative", []float64{1, 2, 3}, []float64{3, 2, 1}, -1, true},
		// Centred x = (-1, 0, 1), y = (-1/3, 2/3, -1/3): sxy = 0.
		{"uncorrelated", []float64{1, 2, 3}, []float64{0, 1, 0}, 0, true},
		// Centred x = (-1.5,-.5,.5,1.5), y = (-.5,.5,-.5,.5):
		// sxy = 1, sxx = 5, syy = 1 → 1/√5.
		{"partial", []float64{0, 1, 2, 3}, []float64{0, 1, 0, 1}, 1 / math.Sqrt(5), true},
		{"empty", nil, nil, 0, false},
		{"one", []float64{1}, []float64{1}, 0, false},
		{"length mismatch", []float64{1, 2}, []float64{1}, 0, false},
		{"constant x", []float64{0.3, 0.3, 0.3}, []float64{0, 1, 0.5}, 0, false},
		{"constant y", []float64{0, 1, 0.5}, []float64{0.1, 0.1, 0.1}, 0, false},
		{"all zero", []float64{0, 0}, []float64{0, 0}, 0, false},
		{"NaN", []float64{0, math.NaN(), 1}, []float64{0, 1, 2}, 0, false},
		{"Inf", []float64{0, 1, 2}, []float64{0, math.Inf(-1), 2}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Pearson(tt.xs, tt.ys)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("Pearson = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
			var c Corr
			if len(tt.xs) == len(tt.ys) {
				c.AddAll(tt.xs, tt.ys)
				rgot, rok := c.Rho()
				// Non-finite pairs are skipped by Corr, so only compare
				// when every input is finite.
				if allFinite(tt.xs) && allFinite(tt.ys) && (rok != tt.ok || math.Abs(rgot-tt.want) > 1e-12) {
					t.Errorf("Corr.Rho = %v, %v; want %v, %v", rgot, rok, tt.want, tt.ok)
				}
			}
		})
	}
}

func allFinite(xs []float64) bool {
	for _, x := range xs {
		if !isFinite(x) {
			return false
		}
	}
	return true
}

func TestCorrSkipsNonFinite(t *testing.T) {
	var c Corr
	c.Add(0, 0)
	c.Add(math.NaN(), 1)
	c.Add(1, math.Inf(1))
	c.Add(1, 1)
	if want := (Corr{N: 2, SumX: 1, SumY: 1, SumXY: 1, SumXX: 1, SumYY: 1}); c != want {
		t.Fatalf("Corr = %+v, want %+v", c, want)
	}
	if r, ok := c.Rho(); !ok || r != 1 {
		t.Fatalf("Rho = %v, %v; want 1, true", r, ok)
	}
}

func TestCorrZeroValue(t *testing.T) {
	if _, ok := (Corr{}).Rho(); ok {
		t.Fatal("zero Corr has a defined Rho")
	}
}

// Constant series accumulated many times must stay undefined even though
// SumXX − SumX²/N is not exactly zero after rounding.
func TestCorrConstantLongRun(t *testing.T) {
	var c Corr
	for i := range 100000 {
		c.Add(0.1, float64(i%7)/7)
	}
	if r, ok := c.Rho(); ok {
		t.Fatalf("constant x gave Rho %v", r)
	}
}

func TestCorrAddAllPanicsOnMismatch(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	var c Corr
	c.AddAll([]float64{1, 2}, []float64{1})
}

// The running sums must agree with the two-pass formula, also when the
// accumulation is interrupted: the first half goes into one value, which is
// copied (as the store persists and reloads it) before the rest is added.
func TestCorrRunningMatchesTwoPass(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(2, 2000).Draw(t, "n")
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		// Scores like the real ones: win rates and F1 in [0, 1], with an
		// optional dependence so correlations span the range.
		slope := rapid.Float64Range(-1, 1).Draw(t, "slope")
		xs, ys := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i] = rng.Float64()
			ys[i] = slope*xs[i] + (1-math.Abs(slope))*rng.Float64()
		}
		want, wok := Pearson(xs, ys)

		var c Corr
		c.AddAll(xs, ys)
		got, ok := c.Rho()
		if ok != wok || math.Abs(got-want) > 1e-9 {
			t.Fatalf("running %v,%v two-pass %v,%v", got, ok, want, wok)
		}

		cut := rapid.IntRange(0, n).Draw(t, "cut")
		var first Corr
		first.AddAll(xs[:cut], ys[:cut])
		resumed := first // a restart: the persisted value, copied
		resumed.AddAll(xs[cut:], ys[cut:])
		if resumed != c {
			t.Fatalf("resumed sums %+v differ from uninterrupted %+v", resumed, c)
		}

		// Merging two halves accumulated separately agrees to rounding.
		var second Corr
		second.AddAll(xs[cut:], ys[cut:])
		first.Merge(second)
		if mr, mok := first.Rho(); mok != wok || math.Abs(mr-want) > 1e-9 {
			t.Fatalf("merged %v,%v two-pass %v,%v", mr, mok, want, wok)
		}
	})
}

// Perfectly correlated data must give exactly ±1, not 0.9999999999999998:
// callers compare Rho with thresholds such as RhoMin = 1.
func TestRhoExactAtPerfectCorrelation(t *testing.T) {
	if r, ok := rhoHigh.Rho(); !ok || r != 1 {
		t.Errorf("Rho = %v, %v; want exactly 1", r, ok)
	}
	if r, ok := rhoLow.Rho(); !ok || r != -1 {
		t.Errorf("Rho = %v, %v; want exactly -1", r, ok)
	}
}
