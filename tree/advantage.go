package tree

import (
	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
)

// Advantages computes a group's advantage records: GRPO (package grpo) over
// the outcome rewards, or over R = R_base + λ·score when a shaping is given.
// The zero-variance flags are taken before and after shaping. eps must be
// valid for grpo.Advantages.
func Advantages(g model.Group, leaves []Leaf, shaping *Shaping, eps float64) []model.Advantage {
	base := make([]float64, len(leaves))
	for i, l := range leaves {
		base[i] = l.Reward
	}
	before := grpo.Advantages(base, eps)
	total := base
	var lambda float64
	var rubrics []uint64
	if shaping != nil {
		lambda, rubrics = shaping.Lambda, shaping.Rubrics
		total = grpo.Shape(base, shaping.Scores, lambda)
	}
	after := before
	if shaping != nil {
		after = grpo.Advantages(total, eps)
	}
	out := make([]model.Advantage, len(leaves))
	for i, l := range leaves {
		var score float64
		if shaping != nil {
			score = shaping.Scores[i]
		}
		out[i] = model.Advantage{Step: g.Step, Group: g.ID, Leaf: l.Node.ID, Outcome: base[i], RubricScore: score,
			Lambda: lambda, Total: total[i], Mean: after.Mean, Std: after.Std, Advantage: after.Adv[i], Rubrics: rubrics,
			ZeroVariance: before.ZeroVariance, ZeroVarianceAfter: after.ZeroVariance}
	}
	return out
}
