package batch

import "slices"

// Expand turns a tree-layout batch into the rows layout: each row's
// segments from its prompt to its last one, the tokens of segments it does
// not own masked, with logprob and advantage 0. Expanding a tree batch
// gives exactly the rows batch read with the same options.
func (b *Batch) Expand() *Batch {
	if b.Layout == Rows {
		return b
	}
	out := &Batch{
		Run: b.Run, Step: b.Step, Layout: Rows, Groups: b.Groups, OpenGroups: b.OpenGroups,
		RowLeaf: b.RowLeaf, RowGroup: b.RowGroup, RowStatus: b.RowStatus, RowReward: b.RowReward,
		RowAdvantage: b.RowAdvantage, RowPolicyMin: b.RowPolicyMin, RowPolicyMax: b.RowPolicyMax,
		TokensMaterialised: b.TokensMaterialised, TokensPacked: b.TokensPacked,
		ActionTokensWithoutLogprobs: b.ActionTokensWithoutLogprobs,
		RowOffsets:                  make([]int64, 1, b.Len()+1),
	}
	var path []int64
	for r, last := range b.RowSegment {
		path = path[:0]
		for s := last; s >= 0; s = b.SegParent[s] {
			path = append(path, s)
		}
		slices.Reverse(path)
		for _, s := range path {
			lo, hi := b.SegOffsets[s], b.SegOffsets[s+1]
			out.InputIDs = append(out.InputIDs, b.InputIDs[lo:hi]...)
			out.Positions = append(out.Positions, b.Positions[lo:hi]...)
			if b.SegOwner[s] == int64(r) {
				out.LossMask = append(out.LossMask, b.LossMask[lo:hi]...)
				out.OldLogprobs = append(out.OldLogprobs, b.OldLogprobs[lo:hi]...)
				out.Advantages = append(out.Advantages, b.Advantages[lo:hi]...)
			} else {
				out.LossMask = append(out.LossMask, make([]uint8, hi-lo)...)
				out.OldLogprobs = append(out.OldLogprobs, make([]float32, hi-lo)...)
				out.Advantages = append(out.Advantages, make([]float32, hi-lo)...)
			}
		}
		out.RowOffsets = append(out.RowOffsets, int64(len(out.InputIDs)))
	}
	return out
}
