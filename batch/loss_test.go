package batch_test

import (
	"math"
	"testing"

	"github.com/patrdb/patrdb/batch"
)

// w_r is 1/N for token-mean and 1/(R·n_r) for seq-mean-token-mean; a row
// that trains nothing weighs 0 rather than dividing by 0.
func TestRowWeight(t *testing.T) {
	for _, c := range []struct {
		norm            batch.Norm
		tokens, rows, n int64
		want            float64
	}{
		{batch.TokenMean, 8, 2, 3, 1.0 / 8},
		{batch.TokenMean, 8, 2, 5, 1.0 / 8},
		{batch.SeqMeanTokenMean, 8, 2, 3, 1.0 / 6},
		{batch.SeqMeanTokenMean, 8, 4, 5, 1.0 / 20},
		{batch.TokenMean, 8, 2, 0, 0},
		{batch.SeqMeanTokenMean, 8, 2, 0, 0},
	} {
		if got := batch.RowWeight(c.norm, c.tokens, c.rows, c.n); got != c.want {
			t.Errorf("RowWeight(%s, tokens %d, rows %d, n %d) = %v, want %v", c.norm, c.tokens, c.rows, c.n, got, c.want)
		}
	}
}

// A⁺ = max(a, 0) and A⁻ = max(−a, 0), neither ever a negative zero (a
// trainer that tests the sign bit would see one as negative).
func TestSplitAdvantage(t *testing.T) {
	for _, c := range []struct {
		a        float32
		pos, neg float64
	}{
		{1.5, 1.5, 0}, {-0.25, 0, 0.25}, {0, 0, 0}, {float32(math.Copysign(0, -1)), 0, 0},
		{math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32, 0},
	} {
		pos, neg := batch.SplitAdvantage(c.a)
		if pos != c.pos || neg != c.neg || math.Signbit(pos) || math.Signbit(neg) {
			t.Errorf("SplitAdvantage(%v) = %v, %v; want %v, %v", c.a, pos, neg, c.pos, c.neg)
		}
	}
}

// coef_pos = w·A⁺ and coef_neg = w·A⁻, computed in float64.
func TestCoefs(t *testing.T) {
	for _, c := range []struct {
		w        float64
		a        float32
		pos, neg float32
	}{
		{0.25, 2, 0.5, 0}, {0.25, -2, 0, 0.5}, {0.5, 0, 0, 0}, {1.0 / 3, 3, 1, 0},
	} {
		if pos, neg := batch.Coefs(c.w, c.a); pos != c.pos || neg != c.neg {
			t.Errorf("Coefs(%v, %v) = %v, %v; want %v, %v", c.w, c.a, pos, neg, c.pos, c.neg)
		}
	}
}
