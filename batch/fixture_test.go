package batch_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/store"
)

// llmSpec shapes an LLM-like forest: prompts and turns of hundreds of
// tokens, forks anywhere in the parent's turns (0 included), every leaf
// status, turns with and without logprobs, several policy versions.
type llmSpec struct {
	steps, groups, roots, depth, maxTurns, tokens int
	seed                                          uint64
}

func buildLLM(tb testing.TB, db *store.DB, run string, spec llmSpec) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(spec.seed, 99))
	ids := func(n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = rng.Uint32N(150_000)
		}
		return out
	}
	turn := func() store.Turn {
		na := spec.tokens/4 + rng.IntN(spec.tokens/2)
		t := store.Turn{Action: "act", ActionTokens: ids(na), Observation: "obs",
			ObservationTokens: ids(spec.tokens/2 + rng.IntN(spec.tokens)), PolicyVersion: uint64(1 + rng.IntN(5))}
		if rng.IntN(6) != 0 {
			t.ActionLogprobs = make([]float32, na)
			for i := range t.ActionLogprobs {
				t.ActionLogprobs[i] = -rng.Float32() * 3
			}
		}
		return t
	}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun(run, nil, nil); return err }))
	for step := 1; step <= spec.steps; step++ {
		for gi := 0; gi < spec.groups; gi++ {
			must(db.Update(func(tx *store.Tx) error {
				r, err := tx.Run(run)
				if err != nil {
					return err
				}
				g, err := r.OpenGroup(store.GroupSpec{Step: uint64(step), Task: "t", PromptTokens: ids(50 + rng.IntN(spec.tokens))})
				if err != nil {
					return err
				}
				var leaves []uint64
				var grow func(parent uint64, fork, ordinal, depth int) error
				grow = func(parent uint64, fork, ordinal, depth int) error {
					n, err := r.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ordinal})
					if err != nil {
						return err
					}
					turns := make([]store.Turn, rng.IntN(spec.maxTurns+1))
					for i := range turns {
						turns[i] = turn()
					}
					if err := r.AppendTurns(n.ID, 0, turns...); err != nil {
						return err
					}
					if depth < spec.depth && rng.IntN(10) < 6 {
						if err := r.SetNodeStatus(n.ID, store.NodeExpanded); err != nil {
							return err
						}
						for c := range 2 + rng.IntN(2) {
							f := len(turns)
							if rng.IntN(3) == 0 {
								f = rng.IntN(len(turns) + 1)
							}
							if err := grow(n.ID, f, c, depth+1); err != nil {
								return err
							}
						}
						return nil
					}
					if rng.IntN(8) == 0 {
						return r.FailNode(n.ID, "policy timed out")
					}
					status := []store.NodeStatus{store.NodeCompleted, store.NodeCompleted, store.NodePruned, store.NodeTruncated}[rng.IntN(4)]
					if err := r.SetReward(n.ID, float64(rng.IntN(2))); err != nil {
						return err
					}
					leaves = append(leaves, n.ID)
					return r.SetNodeStatus(n.ID, status)
				}
				for i := range spec.roots {
					if err := grow(0, 0, i, 0); err != nil {
						return err
					}
				}
				if gi == spec.groups-1 && step == spec.steps {
					return nil // the last group stays open
				}
				for _, l := range leaves {
					if err := r.PutAdvantage(store.Advantage{Step: g.Step, Group: g.ID, Leaf: l, Outcome: 1, Total: 1, Std: 1, Advantage: rng.NormFloat64()}); err != nil {
						return err
					}
				}
				return r.CloseGroup(g.Step, g.ID)
			}))
		}
	}
}

// reference builds the rows layout the way a trainer would by hand, from
// each leaf's Trajectory, with the ownership rule applied turn by turn.
func reference(tb testing.TB, r *store.RunTx, step uint64, opts batch.Options) *batch.Batch {
	tb.Helper()
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	groups, err := r.Groups(step)
	must(err)
	if opts.Groups != nil {
		groups = slices.DeleteFunc(groups, func(g store.Group) bool { return !slices.Contains(opts.Groups, g.ID) })
	}
	out := &batch.Batch{Run: r.ID(), Step: step, Layout: batch.Rows, RowOffsets: []int64{0}}
	status := map[store.NodeStatus]uint8{store.NodeCompleted: 0, store.NodePruned: 1, store.NodeTruncated: 2, store.NodeFailed: 3}
	type key struct {
		node  uint64
		index int
	}
	for _, g := range groups {
		if g.Status != store.GroupClosed {
			out.OpenGroups = append(out.OpenGroups, g.ID)
			continue
		}
		out.Groups = append(out.Groups, g.ID)
		nodes, err := r.GroupNodes(g)
		must(err)
		slices.SortFunc(nodes, func(a, b store.Node) int { return int(a.ID) - int(b.ID) })
		advs, err := r.Advantages(step, g.ID)
		must(err)
		owner := map[key]uint64{}
		packed := map[key]int{}
		for _, n := range nodes {
			want := map[store.NodeStatus]bool{store.NodeCompleted: true, store.NodePruned: !opts.ExcludePruned,
				store.NodeTruncated: !opts.ExcludeTruncated, store.NodeFailed: opts.IncludeFailed}[n.Status]
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
				if a.Leaf == n.ID && n.Status != store.NodeFailed {
					adv = a.Advantage
				}
			}
			if len(packed) == 0 {
				packed[key{}] = len(g.PromptTokens)
			}
			out.RowLeaf = append(out.RowLeaf, int64(n.ID))
			out.RowGroup = append(out.RowGroup, int64(g.ID))
			out.RowStatus = append(out.RowStatus, status[n.Status])
			out.RowReward = append(out.RowReward, n.Reward)
			out.RowAdvantage = append(out.RowAdvantage, adv)
			out.RowPolicyMin = append(out.RowPolicyMin, int64(vmin))
			out.RowPolicyMax = append(out.RowPolicyMax, int64(vmax))
			start := len(out.InputIDs)
			for _, id := range g.PromptTokens {
				out.InputIDs = append(out.InputIDs, int32(id))
				out.LossMask, out.OldLogprobs, out.Advantages = append(out.LossMask, 0), append(out.OldLogprobs, 0), append(out.Advantages, 0)
			}
			for _, t := range traj {
				k := key{t.Node, t.Index}
				if _, ok := owner[k]; !ok {
					owner[k] = n.ID
				}
				packed[k] = len(t.ActionTokens) + len(t.ObservationTokens)
				for i, id := range t.ActionTokens {
					out.InputIDs = append(out.InputIDs, int32(id))
					if owner[k] == n.ID {
						lp := float32(0)
						if len(t.ActionLogprobs) > 0 {
							lp = t.ActionLogprobs[i]
						} else {
							out.ActionTokensWithoutLogprobs++
						}
						out.LossMask, out.OldLogprobs, out.Advantages = append(out.LossMask, 1), append(out.OldLogprobs, lp), append(out.Advantages, float32(adv))
					} else {
						out.LossMask, out.OldLogprobs, out.Advantages = append(out.LossMask, 0), append(out.OldLogprobs, 0), append(out.Advantages, 0)
					}
				}
				for _, id := range t.ObservationTokens {
					out.InputIDs = append(out.InputIDs, int32(id))
					out.LossMask, out.OldLogprobs, out.Advantages = append(out.LossMask, 0), append(out.OldLogprobs, 0), append(out.Advantages, 0)
				}
			}
			for i := range len(out.InputIDs) - start {
				out.Positions = append(out.Positions, int32(i))
			}
			out.RowOffsets = append(out.RowOffsets, int64(len(out.InputIDs)))
		}
		for _, n := range packed {
			out.TokensPacked += int64(n)
		}
	}
	out.TokensMaterialised = int64(len(out.InputIDs))
	return out
}
