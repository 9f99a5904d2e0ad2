// Package batchtest builds LLM-shaped steps in a store for the tests of
// package batch and batchdb: forests with prompts and turns of hundreds of
// tokens, forks anywhere, every leaf status, turns with and without
// logprobs, several policy versions. It is code, not a test file, because
// both packages' tests use it.
package batchtest

import (
	"math/rand/v2"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// LLMSpec shapes an LLM-like forest: prompts and turns of hundreds of
// tokens, forks anywhere in the parent's turns (0 included), every leaf
// status, turns with and without logprobs, several policy versions.
type LLMSpec struct {
	Steps, Groups, Roots, Depth, MaxTurns, Tokens int
	Seed                                          uint64
}

// BuildLLM writes spec's forest into run (created here) of db: spec.Steps
// steps of spec.Groups groups, every group closed with GRPO advantages
// but the last of the last step, which stays open.
func BuildLLM(tb testing.TB, db *store.DB, run string, spec LLMSpec) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(spec.Seed, 99))
	ids := func(n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = rng.Uint32N(150_000)
		}
		return out
	}
	turn := func() model.Turn {
		na := spec.Tokens/4 + rng.IntN(spec.Tokens/2)
		t := model.Turn{Action: "act", ActionTokens: ids(na), Observation: "obs",
			ObservationTokens: ids(spec.Tokens/2 + rng.IntN(spec.Tokens)), PolicyVersion: uint64(1 + rng.IntN(5))}
		if rng.IntN(6) != 0 {
			t.ActionLogprobs = make([]float32, na)
			for i := range t.ActionLogprobs {
				t.ActionLogprobs[i] = -rng.Float32() * 3
			}
		}
		// Per-turn rewards and turns without action tokens, derived from
		// what was drawn so the generator's stream (and every other value)
		// stays as it was.
		t.Reward = float64(na%3) * 0.25
		if na%13 == 0 {
			t.ActionTokens, t.ActionLogprobs = nil, nil
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
	for step := 1; step <= spec.Steps; step++ {
		for gi := 0; gi < spec.Groups; gi++ {
			must(db.UpdateRun(run, func(r *store.RunTx) error {
				g, err := r.OpenGroup(store.GroupSpec{Step: uint64(step), Task: "t", PromptTokens: ids(50 + rng.IntN(spec.Tokens))})
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
					turns := make([]model.Turn, rng.IntN(spec.MaxTurns+1))
					for i := range turns {
						turns[i] = turn()
					}
					if err := r.AppendTurns(n.ID, 0, turns...); err != nil {
						return err
					}
					if depth < spec.Depth && rng.IntN(10) < 6 {
						if err := r.SetNodeStatus(n.ID, model.NodeExpanded); err != nil {
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
					status := []model.NodeStatus{model.NodeCompleted, model.NodeCompleted, model.NodePruned, model.NodeTruncated}[rng.IntN(4)]
					if err := r.SetReward(n.ID, float64(rng.IntN(2))); err != nil {
						return err
					}
					leaves = append(leaves, n.ID)
					return r.SetNodeStatus(n.ID, status)
				}
				for i := range spec.Roots {
					if err := grow(0, 0, i, 0); err != nil {
						return err
					}
				}
				if gi == spec.Groups-1 && step == spec.Steps {
					return nil // the last group stays open
				}
				for _, l := range leaves {
					if err := r.PutAdvantage(model.Advantage{Step: g.Step, Group: g.ID, Leaf: l, Outcome: 1, Total: 1, Std: 1, Advantage: rng.NormFloat64()}); err != nil {
						return err
					}
				}
				return r.CloseGroup(g.Step, g.ID)
			}))
		}
	}
}
