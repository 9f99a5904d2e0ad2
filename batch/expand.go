package batch

import "slices"

// Expand turns a tree-layout batch into the rows layout: each row's
// segments from its prompt to its last one, trained as the batch's credit
// rule says — every segment with the row's advantage (Repeat), or only
// the segments the row owns with the tree's advantage (Mean, Owner), the
// others masked with logprob, advantage and coefficients 0 — and the
// coefficients recomputed for rows. Expanding a tree batch gives exactly
// the rows batch read with the same options.
func (b *Batch) Expand() *Batch {
	if b.Layout == Rows {
		return b
	}
	out := &Batch{
		Run: b.Run, Step: b.Step, Layout: Rows, Credit: b.Credit, Norm: b.Norm, Groups: b.Groups, OpenGroups: b.OpenGroups,
		RowLeaf: b.RowLeaf, RowGroup: b.RowGroup, RowStatus: b.RowStatus, RowReward: b.RowReward,
		RowAdvantage: b.RowAdvantage, RowPolicyMin: b.RowPolicyMin, RowPolicyMax: b.RowPolicyMax, RowPromptLen: b.RowPromptLen,
		TokensMaterialised: b.TokensMaterialised, TokensPacked: b.TokensPacked,
		ActionTokensWithoutLogprobs: b.ActionTokensWithoutLogprobs,
		LossTokens:                  b.LossTokens, LossRows: b.LossRows, TurnRewardsDropped: b.TurnRewardsDropped,
		RowOffsets: make([]int64, 1, b.Len()+1),
	}
	var path []int64
	for r, last := range b.RowSegment {
		path = path[:0]
		for s := last; s >= 0; s = b.SegParent[s] {
			path = append(path, s)
		}
		slices.Reverse(path)
		start := len(out.InputIDs)
		for _, s := range path {
			lo, hi := b.SegOffsets[s], b.SegOffsets[s+1]
			out.InputIDs = append(out.InputIDs, b.InputIDs[lo:hi]...)
			out.Positions = append(out.Positions, b.Positions[lo:hi]...)
			out.PolicyVersions = append(out.PolicyVersions, b.PolicyVersions[lo:hi]...)
			out.TurnIndex = append(out.TurnIndex, b.TurnIndex[lo:hi]...)
			out.TurnRewards = append(out.TurnRewards, b.TurnRewards[lo:hi]...)
			switch {
			case b.Credit == Repeat:
				out.LossMask = append(out.LossMask, b.LossMask[lo:hi]...)
				out.OldLogprobs = append(out.OldLogprobs, b.OldLogprobs[lo:hi]...)
				for _, m := range b.LossMask[lo:hi] {
					a := float32(0)
					if m != 0 {
						a = float32(b.RowAdvantage[r])
					}
					out.Advantages = append(out.Advantages, a)
				}
			case b.SegOwner[s] == int64(r):
				out.LossMask = append(out.LossMask, b.LossMask[lo:hi]...)
				out.OldLogprobs = append(out.OldLogprobs, b.OldLogprobs[lo:hi]...)
				out.Advantages = append(out.Advantages, b.Advantages[lo:hi]...)
			default:
				out.LossMask = append(out.LossMask, make([]uint8, hi-lo)...)
				out.OldLogprobs = append(out.OldLogprobs, make([]float32, hi-lo)...)
				out.Advantages = append(out.Advantages, make([]float32, hi-lo)...)
			}
		}
		n := int64(0)
		for _, m := range out.LossMask[start:] {
			n += int64(m)
		}
		w := RowWeight(b.Norm, b.LossTokens, b.LossRows, n)
		for i, m := range out.LossMask[start:] {
			var pos, neg, lw float32
			if m != 0 {
				pos, neg = Coefs(w, out.Advantages[start+i])
				lw = float32(w)
			}
			out.CoefPos, out.CoefNeg, out.LossWeight = append(out.CoefPos, pos), append(out.CoefNeg, neg), append(out.LossWeight, lw)
		}
		out.RowOffsets = append(out.RowOffsets, int64(len(out.InputIDs)))
	}
	return out
}
