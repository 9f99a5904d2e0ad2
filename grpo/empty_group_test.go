package grpo_test

import (
	"math"
	"testing"

	"github.com/patrdb/patrdb/grpo"
)

// An empty group has no spread: Variance documents 0 for it, where the
// two-pass formula alone would give 0/0 = NaN and poison every statistic
// built on it. (A tolerance check such as |got−want| > tol is false for
// NaN, so the value is compared exactly.)
func TestEmptyGroupStatistics(t *testing.T) {
	if v := grpo.Variance(nil); v != 0 || math.IsNaN(v) {
		t.Errorf("Variance(nil) = %v, want 0", v)
	}
	if v := grpo.Variance([]float64{}); v != 0 {
		t.Errorf("Variance([]) = %v, want 0", v)
	}
	if m := grpo.Mean(nil); !math.IsNaN(m) {
		t.Errorf("Mean(nil) = %v, want NaN", m)
	}
	a := grpo.Advantages(nil, grpo.DefaultEps)
	if !a.ZeroVariance || a.Std != 0 || len(a.Adv) != 0 {
		t.Errorf("Advantages(nil) = %+v, want a zero-variance result with no advantages", a)
	}
}
