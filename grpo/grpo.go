package grpo

import (
	"fmt"
	"math"
)

// DefaultEps keeps advantages finite when a group's rewards barely differ.
const DefaultEps = 1e-6

// zeroStdTol is the standard deviation, relative to the rewards' magnitude
// (at least 1), under which a group counts as having equal rewards: the mean
// of n equal floats is not always exactly that float, and the resulting
// ~1e-17 spread divided by a small eps would turn rounding into advantages.
const zeroStdTol = 1e-12

// Result is the advantages of one group and the statistics they were
// computed from, kept so a store can record why each trajectory got its
// advantage.
type Result struct {
	Mean, Std float64
	Adv       []float64
	// ZeroVariance marks a group whose rewards are all equal: it carries no
	// gradient and every Adv is exactly 0.
	ZeroVariance bool
}

// Advantages computes A_i = (r_i − mean)/(std + eps) under the rules of the
// package doc. NaN rewards give NaN advantages. It panics when eps is
// negative, NaN or infinite.
func Advantages(rewards []float64, eps float64) Result {
	if !(eps >= 0) || math.IsInf(eps, 0) {
		panic(fmt.Sprintf("grpo: eps = %v, want a finite value >= 0", eps))
	}
	a := Result{Adv: make([]float64, len(rewards))}
	if len(rewards) == 0 {
		a.ZeroVariance = true
		return a
	}
	a.Mean = Mean(rewards)
	a.Std = math.Sqrt(Variance(rewards))
	scale := 1.0
	for _, r := range rewards {
		scale = max(scale, math.Abs(r))
	}
	if a.Std <= zeroStdTol*scale {
		a.ZeroVariance, a.Std = true, 0
		return a
	}
	for i, r := range rewards {
		a.Adv[i] = (r - a.Mean) / (a.Std + eps)
	}
	return a
}

// ValidEps reports whether Advantages accepts eps.
func ValidEps(eps float64) bool { return eps >= 0 && !math.IsInf(eps, 0) }

// Mean is the arithmetic mean of xs; NaN for an empty slice.
func Mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// Variance is the population variance (divisor n) of xs, computed in two
// passes so that a large common offset does not cancel away the spread; 0
// for an empty slice.
func Variance(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := Mean(xs)
	var s float64
	for _, x := range xs {
		d := x - m
		s += d * d
	}
	return s / float64(len(xs))
}

// Shape returns R_i = base_i + lambda·score_i, in a new slice. score should
// already be centred within the group, so shaping redistributes reward among
// the group instead of shifting it (which normalisation would cancel). It
// panics when the slices differ in length.
func Shape(base, score []float64, lambda float64) []float64 {
	if len(base) != len(score) {
		panic(fmt.Sprintf("grpo: Shape: %d base rewards, %d scores", len(base), len(score)))
	}
	out := make([]float64, len(base))
	for i := range base {
		out[i] = base[i] + lambda*score[i]
	}
	return out
}
