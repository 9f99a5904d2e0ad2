package tree

import "math"

// DefaultEps keeps advantages finite when a group's rewards barely differ.
const DefaultEps = 1e-6

// GRPOAdvantages returns A_i = (r_i − mean)/(std + eps) with the population
// std, and whether the rewards had zero variance (then every A_i is 0).
func GRPOAdvantages(rewards []float64, eps float64) (adv []float64, mean, std float64, zeroVar bool) {
	n := float64(len(rewards))
	adv = make([]float64, len(rewards))
	if len(rewards) == 0 {
		return adv, 0, 0, true
	}
	for _, r := range rewards {
		mean += r
	}
	mean /= n
	var ss float64
	for _, r := range rewards {
		ss += (r - mean) * (r - mean)
	}
	std = math.Sqrt(ss / n)
	scale := 1.0
	for _, r := range rewards {
		scale = math.Max(scale, math.Abs(r))
	}
	if std <= 1e-12*scale {
		return adv, mean, 0, true
	}
	for i, r := range rewards {
		adv[i] = (r - mean) / (std + eps)
	}
	return adv, mean, std, false
}
