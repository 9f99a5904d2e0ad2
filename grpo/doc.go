// Package grpo is the group-relative advantage of GRPO, the one kernel the
// PaTR engine (tree) and the rubric buffer (rubricpool) both compute with:
//
//	A_i = (r_i − mean) / (std + eps)
//
// over one group's rewards, with the population standard deviation (divisor
// n: the group is the whole population being normalised, not a sample).
//
// Rules every caller relies on:
//
//   - A group whose std is at most 1e-12·max(1, max|r_i|) has zero variance
//     (an empty or one-element group too): it carries no gradient, every
//     advantage is exactly 0 and Std is reported as 0. The cut is relative
//     so that the rounding of a mean of equal large rewards is not mistaken
//     for signal, and floored at 1 so tiny rewards are not rescaled.
//   - eps must be finite and ≥ 0 (DefaultEps unless the caller chose one);
//     anything else panics, since a negative eps can divide by zero.
//   - Shaped rewards are R_i = base_i + λ·score_i (Shape); advantages over a
//     shaped group are GRPO over R.
//
// The package imports only the standard library.
package grpo
