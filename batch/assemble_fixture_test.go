package batch_test

import (
	"slices"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// reference builds the rows layout the way a trainer would by hand, from
// each leaf's Trajectory, with the credit rule and normalisation applied
// turn by turn as the package documentation states them.
func reference(tb testing.TB, r *store.RunTx, step uint64, opts batch.Options) *batch.Batch {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	credit, norm := opts.Credit, opts.Norm
	if credit == "" {
		credit = batch.Repeat
	}
	if norm == "" {
		norm = batch.TokenMean
	}
	groups, err := r.Groups(step)
	must(err)
	if opts.Groups != nil {
		groups = slices.DeleteFunc(groups, func(g model.Group) bool { return !slices.Contains(opts.Groups, g.ID) })
	}
	out := &batch.Batch{Run: r.ID(), Step: step, Layout: batch.Rows, Credit: credit, Norm: norm, RowOffsets: []int64{0}}
	status := map[model.NodeStatus]uint8{model.NodeCompleted: 0, model.NodePruned: 1, model.NodeTruncated: 2, model.NodeFailed: 3}
	type key struct {
		group uint64
		node  uint64
		index int
	}
	type leafRow struct {
		n          model.Node
		g          model.Group
		adv        float64
		traj       []model.PathTurn
		vmin, vmax uint64
	}
	var rows []leafRow
	owner := map[key]int{}     // the first row (leaf id order) that contains the turn
	sharers := map[key][]int{} // every row that contains it
	packed := map[key]int{}
	for _, g := range groups {
		if g.Status != model.GroupClosed {
			out.OpenGroups = append(out.OpenGroups, g.ID)
			continue
		}
		out.Groups = append(out.Groups, g.ID)
		nodes, err := r.GroupNodes(g)
		must(err)
		slices.SortFunc(nodes, func(a, b model.Node) int { return int(a.ID) - int(b.ID) })
		advs, err := r.Advantages(step, g.ID)
		must(err)
		for _, n := range nodes {
			want := map[model.NodeStatus]bool{model.NodeCompleted: true, model.NodePruned: !opts.ExcludePruned,
				model.NodeTruncated: !opts.ExcludeTruncated, model.NodeFailed: opts.IncludeFailed}[n.Status]
			if !want {
				continue
			}
			traj, err := r.Trajectory(n.ID)
			must(err)
			var vmin, vmax uint64
			for i, t := range traj {
				if i == 0 || t.PolicyVersion < vmin {
					vmin = t.PolicyVersion
				}
				if i == 0 || t.PolicyVersion > vmax {
					vmax = t.PolicyVersion
				}
			}
			if vmin < opts.MinPolicyVersion || (opts.MaxPolicyVersion != 0 && vmax > opts.MaxPolicyVersion) {
				continue
			}
			adv := 0.0
			for _, a := range advs {
				if a.Leaf == n.ID && n.Status != model.NodeFailed {
					adv = a.Advantage
				}
			}
			ri := len(rows)
			rows = append(rows, leafRow{n: n, g: g, adv: adv, traj: traj, vmin: vmin, vmax: vmax})
			packed[key{g.ID, 0, -1}] = len(g.PromptTokens)
			for _, t := range traj {
				k := key{g.ID, t.Node, t.Index}
				if _, ok := owner[k]; !ok {
					owner[k] = ri
					if len(t.ActionLogprobs) == 0 {
						out.ActionTokensWithoutLogprobs += int64(len(t.ActionTokens))
					}
					if len(t.ActionTokens) == 0 && t.Reward != 0 {
						out.TurnRewardsDropped++
					}
				}
				sharers[k] = append(sharers[k], ri)
				packed[k] = len(t.ActionTokens) + len(t.ObservationTokens)
			}
		}
	}
	for _, n := range packed {
		out.TokensPacked += int64(n)
	}
	// The rule: which rows train a turn, and with which advantage.
	trains := func(ri int, k key) bool { return credit == batch.Repeat || owner[k] == ri }
	advOf := func(ri int, k key) float32 {
		if credit != batch.Mean {
			return float32(rows[ri].adv)
		}
		sum := 0.0
		for _, s := range sharers[k] {
			sum += rows[s].adv
		}
		return float32(sum / float64(len(sharers[k])))
	}
	trained := make([]int64, len(rows))
	for ri, rw := range rows {
		for _, t := range rw.traj {
			if trains(ri, key{rw.g.ID, t.Node, t.Index}) {
				trained[ri] += int64(len(t.ActionTokens))
			}
		}
		out.LossTokens += trained[ri]
		if trained[ri] > 0 {
			out.LossRows++
		}
	}
	for ri, rw := range rows {
		w := 0.0
		switch {
		case trained[ri] == 0:
		case norm == batch.TokenMean:
			w = 1 / float64(out.LossTokens)
		default:
			w = 1 / (float64(out.LossRows) * float64(trained[ri]))
		}
		out.RowLeaf = append(out.RowLeaf, int64(rw.n.ID))
		out.RowGroup = append(out.RowGroup, int64(rw.g.ID))
		out.RowStatus = append(out.RowStatus, status[rw.n.Status])
		out.RowReward = append(out.RowReward, rw.n.Reward)
		out.RowAdvantage = append(out.RowAdvantage, rw.adv)
		out.RowPolicyMin = append(out.RowPolicyMin, int64(rw.vmin))
		out.RowPolicyMax = append(out.RowPolicyMax, int64(rw.vmax))
		out.RowPromptLen = append(out.RowPromptLen, int64(len(rw.g.PromptTokens)))
		start := len(out.InputIDs)
		token := func(id uint32, version uint64, turn int32) {
			out.InputIDs = append(out.InputIDs, int32(id))
			out.PolicyVersions = append(out.PolicyVersions, int64(version))
			out.TurnIndex = append(out.TurnIndex, turn)
			out.TurnRewards = append(out.TurnRewards, 0)
		}
		untrained := func() {
			out.LossMask, out.OldLogprobs, out.Advantages = append(out.LossMask, 0), append(out.OldLogprobs, 0), append(out.Advantages, 0)
			out.CoefPos, out.CoefNeg, out.LossWeight = append(out.CoefPos, 0), append(out.CoefNeg, 0), append(out.LossWeight, 0)
		}
		for _, id := range rw.g.PromptTokens {
			token(id, 0, -1)
			untrained()
		}
		for ti, t := range rw.traj {
			k := key{rw.g.ID, t.Node, t.Index}
			for i, id := range t.ActionTokens {
				token(id, t.PolicyVersion, int32(ti))
				if i == len(t.ActionTokens)-1 {
					out.TurnRewards[len(out.TurnRewards)-1] = float32(t.Reward)
				}
				if !trains(ri, k) {
					untrained()
					continue
				}
				lp := float32(0)
				if len(t.ActionLogprobs) > 0 {
					lp = t.ActionLogprobs[i]
				}
				a := advOf(ri, k)
				pos, neg := float32(0), float32(0)
				if a > 0 {
					pos = float32(w * float64(a))
				} else if a < 0 {
					neg = float32(w * -float64(a))
				}
				out.LossMask, out.OldLogprobs, out.Advantages = append(out.LossMask, 1), append(out.OldLogprobs, lp), append(out.Advantages, a)
				out.CoefPos, out.CoefNeg, out.LossWeight = append(out.CoefPos, pos), append(out.CoefNeg, neg), append(out.LossWeight, float32(w))
			}
			for _, id := range t.ObservationTokens {
				token(id, t.PolicyVersion, int32(ti))
				untrained()
			}
		}
		for i := range len(out.InputIDs) - start {
			out.Positions = append(out.Positions, int32(i))
		}
		out.RowOffsets = append(out.RowOffsets, int64(len(out.InputIDs)))
	}
	out.TokensMaterialised = int64(len(out.InputIDs))
	return out
}
