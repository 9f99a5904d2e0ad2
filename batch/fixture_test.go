package batch_test

import (
	"github.com/patrdb/patrdb/batch"
)

// The fork: one group (7) whose prompt [11 12] leads to node 20 (action
// token 13, observation token 14, reward 0.5), which forks into leaf 21
// (action token 15) and leaf 22 (action tokens 16 17). Row 0 is leaf 21
// (advantage 1, completed), row 1 leaf 22 (advantage −0.5, pruned); the
// shared segments are owned by row 0, the smaller leaf id.
//
// Tree segments: 0 the prompt, 1 node 20, 2 leaf 21, 3 leaf 22.

// forkTree is the fork in the tree layout under credit and norm.
func forkTree(credit batch.Credit, norm batch.Norm) *batch.Batch {
	shared := float32(0.25) // the mean of 1 and −0.5 (Mean and Repeat)
	if credit == batch.Owner {
		shared = 1
	}
	b := &batch.Batch{
		Run: "r", Step: 12, Layout: batch.Tree, Credit: credit, Norm: norm,
		Groups: []uint64{7}, OpenGroups: []uint64{9},

		InputIDs:       []int32{11, 12, 13, 14, 15, 16, 17},
		LossMask:       []uint8{0, 0, 1, 0, 1, 1, 1},
		OldLogprobs:    []float32{0, 0, -0.5, 0, -0.25, -1, -2},
		Advantages:     []float32{0, 0, shared, 0, 1, -0.5, -0.5},
		Positions:      []int32{0, 1, 2, 3, 4, 4, 5},
		PolicyVersions: []int64{0, 0, 1, 1, 2, 2, 2},
		TurnIndex:      []int32{-1, -1, 0, 0, 1, 1, 1},
		TurnRewards:    []float32{0, 0, 0.5, 0, 0, 0, 0},
		// The tree's coefficients are the reader's; Expand recomputes
		// the rows' own, so any values do here.
		CoefPos:    []float32{0, 0, 0.1, 0, 0.2, 0, 0},
		CoefNeg:    []float32{0, 0, 0.1, 0, 0, 0.1, 0.1},
		LossWeight: []float32{0, 0, 0.4, 0, 0.2, 0.2, 0.2},

		RowSegment:   []int64{2, 3},
		RowLeaf:      []int64{21, 22},
		RowGroup:     []int64{7, 7},
		RowStatus:    []uint8{batch.StatusCompleted, batch.StatusPruned},
		RowReward:    []float64{1, 0},
		RowAdvantage: []float64{1, -0.5},
		RowPolicyMin: []int64{1, 1},
		RowPolicyMax: []int64{2, 2},
		RowPromptLen: []int64{2, 2},

		SegOffsets: []int64{0, 2, 4, 5, 7},
		SegParent:  []int64{-1, 0, 1, 1},
		SegGroup:   []int64{7, 7, 7, 7},
		SegNode:    []int64{0, 20, 21, 22},
		SegOwner:   []int64{0, 0, 0, 1},

		TokensMaterialised: 11, TokensPacked: 7,
		ActionTokensWithoutLogprobs: 1, TurnRewardsDropped: 2,
		LossRows: 2,
	}
	b.LossTokens = forkLossTokens(credit)
	return b
}

// forkLossTokens is N, the trained tokens of the fork's rows layout: under
// Repeat both rows train token 13, under Mean and Owner only row 0 does.
func forkLossTokens(credit batch.Credit) int64 {
	if credit == batch.Repeat {
		return 5
	}
	return 4
}

// forkRows is the fork in the rows layout, written out by hand from the
// package documentation's rules.
func forkRows(credit batch.Credit, norm batch.Norm) *batch.Batch {
	t := forkTree(credit, norm)
	b := &batch.Batch{
		Run: t.Run, Step: t.Step, Layout: batch.Rows, Credit: credit, Norm: norm,
		Groups: t.Groups, OpenGroups: t.OpenGroups,

		InputIDs:       []int32{11, 12, 13, 14, 15 /**/, 11, 12, 13, 14, 16, 17},
		Positions:      []int32{0, 1, 2, 3, 4 /**/, 0, 1, 2, 3, 4, 5},
		PolicyVersions: []int64{0, 0, 1, 1, 2 /**/, 0, 0, 1, 1, 2, 2},
		TurnIndex:      []int32{-1, -1, 0, 0, 1 /**/, -1, -1, 0, 0, 1, 1},
		TurnRewards:    []float32{0, 0, 0.5, 0, 0 /**/, 0, 0, 0.5, 0, 0, 0},
		RowOffsets:     []int64{0, 5, 11},

		RowLeaf: t.RowLeaf, RowGroup: t.RowGroup, RowStatus: t.RowStatus, RowReward: t.RowReward,
		RowAdvantage: t.RowAdvantage, RowPolicyMin: t.RowPolicyMin, RowPolicyMax: t.RowPolicyMax,
		RowPromptLen: t.RowPromptLen,

		TokensMaterialised: 11, TokensPacked: 7,
		ActionTokensWithoutLogprobs: 1, TurnRewardsDropped: 2,
		LossTokens: t.LossTokens, LossRows: 2,
	}
	// Row 0 trains tokens 13 and 15 in every rule.
	b.LossMask = []uint8{0, 0, 1, 0, 1}
	b.OldLogprobs = []float32{0, 0, -0.5, 0, -0.25}
	b.Advantages = []float32{0, 0, 1, 0, 1}
	if credit == batch.Mean {
		b.Advantages[2] = 0.25
	}
	// Row 1 trains token 13 only under Repeat.
	if credit == batch.Repeat {
		b.LossMask = append(b.LossMask, 0, 0, 1, 0, 1, 1)
		b.OldLogprobs = append(b.OldLogprobs, 0, 0, -0.5, 0, -1, -2)
		b.Advantages = append(b.Advantages, 0, 0, -0.5, 0, -0.5, -0.5)
	} else {
		b.LossMask = append(b.LossMask, 0, 0, 0, 0, 1, 1)
		b.OldLogprobs = append(b.OldLogprobs, 0, 0, 0, 0, -1, -2)
		b.Advantages = append(b.Advantages, 0, 0, 0, 0, -0.5, -0.5)
	}
	// w_r: 1/N for token-mean; 1/(R·n_r) for seq-mean-token-mean.
	w := [2]float64{1 / float64(b.LossTokens), 1 / float64(b.LossTokens)}
	if norm == batch.SeqMeanTokenMean {
		w = [2]float64{1.0 / 4, 1.0 / 4} // R 2, n_0 2, n_1 2
		if credit == batch.Repeat {
			w[1] = 1.0 / 6 // n_1 3
		}
	}
	for i, m := range b.LossMask {
		row := 0
		if int64(i) >= b.RowOffsets[1] {
			row = 1
		}
		var pos, neg, lw float32
		if a := float64(b.Advantages[i]); m == 1 {
			lw = float32(w[row])
			pos, neg = float32(w[row]*max(a, 0)), float32(w[row]*max(-a, 0))
		}
		b.CoefPos, b.CoefNeg, b.LossWeight = append(b.CoefPos, pos), append(b.CoefNeg, neg), append(b.LossWeight, lw)
	}
	return b
}

var (
	credits = []batch.Credit{batch.Repeat, batch.Mean, batch.Owner}
	norms   = []batch.Norm{batch.TokenMean, batch.SeqMeanTokenMean}
)
