// Package replaytest builds PaTR-shaped runs for the tests of replay and
// of the packages under it (export, view): seeded steps of groups grown
// interval by interval with tree.Route, so the recorded decisions are the
// ones the routing function gives, as a real trainer's would be.
package replaytest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// RunSpec describes a PaTR-shaped run for BuildRun: several steps of
// groups grown interval by interval with tree.Route under cfg, so the
// recorded decisions are the ones the routing function gives, as a real
// trainer's would be.
type RunSpec struct {
	ID      string
	Cfg     tree.Config
	Steps   int
	Groups  int // per step
	Seed    uint64
	Rubrics bool // ARBOR: rubric pools, shaping, custom rubric events
	Tokens  int  // action tokens per turn (observation tokens are 3x)
}

// SmallSpec is a two-step run of two small groups a step, with rubrics.
func SmallSpec(id string) RunSpec {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta = 3, 2, 2, 1, 0.4
	cfg.RepeatPrune, cfg.MaxTurns = 3, 8
	return RunSpec{ID: id, Cfg: cfg, Steps: 2, Groups: 2, Seed: 1, Rubrics: true, Tokens: 3}
}

// MediumSpec is a four-step run of three groups a step, with rubrics and a
// cap on active branches.
func MediumSpec(id string) RunSpec {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta = 4, 3, 2, 2, 0.5
	cfg.RepeatPrune, cfg.MaxTurns, cfg.MaxActive = 4, 15, 5
	return RunSpec{ID: id, Cfg: cfg, Steps: 4, Groups: 3, Seed: 7, Rubrics: true, Tokens: 5}
}

// DoFunc runs one mutation on the run. BuildRun calls it once per store
// mutation, so a test may commit each in its own transaction and look at
// the store in between, or batch them.
type DoFunc func(func(r *store.RunTx) error)

// branchState is the trainer's in-memory view of an active branch.
type branchState struct {
	node    model.Node
	actions []string // whole path, for RepeatRun
}

// CreateRun creates spec's run, recording its tree config the way a
// trainer does (the tree config under "tree", beside its own members).
func CreateRun(tx *store.Tx, spec RunSpec) (*store.RunTx, error) {
	conf, err := json.Marshal(map[string]any{"tree": spec.Cfg, "trainer": "fixture"})
	if err != nil {
		return nil, err
	}
	return tx.CreateRun(spec.ID, conf, map[string]string{"by": "fixture"})
}

// BuildRun creates spec's run in one transaction, then grows it through
// do, one call per store mutation.
func BuildRun(t testing.TB, db *store.DB, spec RunSpec, do DoFunc) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error { _, err := CreateRun(tx, spec); return err }); err != nil {
		t.Fatal(err)
	}
	GrowRun(t, spec, do)
}

// BuildOneTx builds the whole run in a single transaction (fast, for tests
// that only read the result).
func BuildOneTx(t testing.TB, db *store.DB, spec RunSpec) {
	t.Helper()
	err := db.Update(func(tx *store.Tx) error {
		r, err := CreateRun(tx, spec)
		if err != nil {
			return err
		}
		var first error
		GrowRun(t, spec, func(fn func(*store.RunTx) error) {
			if err := fn(r); err != nil && first == nil {
				first = err
			}
		})
		return first
	})
	if err != nil {
		t.Fatal(err)
	}
}

// GrowRun grows spec's run, already created, through do.
func GrowRun(t testing.TB, spec RunSpec, do DoFunc) {
	t.Helper()
	rng := rand.New(rand.NewPCG(spec.Seed, 99))
	mkTurn := func(action string, done bool) model.Turn {
		tu := model.Turn{Action: action, Observation: "obs-" + action, Reward: 0, Done: done}
		for i := 0; i < spec.Tokens; i++ {
			tu.ActionTokens = append(tu.ActionTokens, uint32(rng.IntN(50000)))
			tu.ActionLogprobs = append(tu.ActionLogprobs, -rng.Float32()*3)
		}
		for i := 0; i < 3*spec.Tokens; i++ {
			tu.ObservationTokens = append(tu.ObservationTokens, uint32(rng.IntN(50000)))
		}
		return tu
	}
	var public []uint64
	var candidates []uint64
	for step := uint64(1); step <= uint64(spec.Steps); step++ {
		for gi := 0; gi < spec.Groups; gi++ {
			var g model.Group
			do(func(r *store.RunTx) (err error) {
				g, err = r.OpenGroup(store.GroupSpec{Step: step, Task: fmt.Sprintf("task-%d", gi), Prompt: "go to the goal", Gold: "goal"})
				return err
			})
			var active []*branchState
			for i := 0; i < spec.Cfg.B0; i++ {
				b := &branchState{}
				do(func(r *store.RunTx) (err error) {
					b.node, err = r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i, Worker: "w0"})
					return err
				})
				active = append(active, b)
			}
			var leaves []model.Node
			for iv := 0; len(active) > 0; iv++ {
				var live []*branchState
				for _, b := range active {
					// Advance up to K turns; a branch may finish on the way.
					k := 1 + rng.IntN(spec.Cfg.K)
					var ts []model.Turn
					finished, status := false, model.NodeCompleted
					for j := 0; j < k; j++ {
						a := []string{"L", "R", "U", "D"}[rng.IntN(4)]
						if len(b.actions) > 0 && rng.IntN(3) > 0 {
							a = b.actions[len(b.actions)-1] // agents repeat themselves
						}
						b.actions = append(b.actions, a)
						done := rng.IntN(9) == 0
						if !done && spec.Cfg.MaxTurns > 0 && len(b.actions) >= spec.Cfg.MaxTurns {
							finished, status = true, model.NodeTruncated
						}
						ts = append(ts, mkTurn(a, done))
						if done || finished {
							finished = true
							break
						}
					}
					from := b.node.Turns
					do(func(r *store.RunTx) error { return r.AppendTurns(b.node.ID, from, ts...) })
					b.node.Turns += len(ts)
					if finished {
						reward := 0.0
						if status == model.NodeCompleted && rng.IntN(2) == 0 {
							reward = 1
						}
						do(func(r *store.RunTx) error { return r.SetReward(b.node.ID, reward) })
						do(func(r *store.RunTx) error { return r.SetNodeStatus(b.node.ID, status) })
						b.node.Status, b.node.Reward, b.node.HasReward = status, reward, true
						leaves = append(leaves, b.node)
						continue
					}
					live = append(live, b)
				}
				if len(live) == 0 {
					break
				}
				var in []tree.Branch
				scores := map[uint64]float64{}
				for _, b := range live {
					s := float64(rng.IntN(9)) / 8 // eighths: ties happen, as with a coarse scorer
					scores[b.node.ID] = s
					in = append(in, tree.Branch{Node: b.node.ID, Score: s, RepeatRun: repeatRun(b.actions)})
				}
				decisions := tree.Route(in, spec.Cfg)
				var next []*branchState
				for i, d := range decisions {
					b := live[i]
					pathLen := b.node.Base + b.node.Turns
					do(func(r *store.RunTx) error {
						return r.Score(b.node.ID, model.Score{Interval: iv, Turn: pathLen, Value: scores[b.node.ID]})
					})
					do(func(r *store.RunTx) error {
						return r.Route(b.node.ID, model.Decision{Interval: iv, Action: d.Action, Score: d.Score,
							Reference: d.Reference, Delta: d.Delta, Rule: d.Rule, Children: d.Children})
					})
					switch d.Action {
					case model.ActionPrune:
						do(func(r *store.RunTx) error { return r.SetReward(b.node.ID, 0) })
						b.node.Status, b.node.HasReward = model.NodePruned, true
						leaves = append(leaves, b.node)
					case model.ActionExpand:
						for c := 0; c < d.Children; c++ {
							kid := &branchState{actions: append([]string(nil), b.actions...)}
							do(func(r *store.RunTx) (err error) {
								kid.node, err = r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Parent: b.node.ID,
									Fork: b.node.Turns, Ordinal: c, EnvState: []byte{byte(c)}})
								return err
							})
							next = append(next, kid)
						}
					case model.ActionSurvive:
						do(func(r *store.RunTx) error { return r.SetEnvState(b.node.ID, []byte{byte(iv)}) })
						next = append(next, b)
					}
				}
				do(func(r *store.RunTx) error { return r.SetGroupInterval(step, g.ID, iv+1) })
				active = next
			}
			// GRPO advantages over the leaves, shaped by rubrics.
			writeAdvantages(t, rng, spec, step, g.ID, leaves, public, do)
			do(func(r *store.RunTx) error { return r.CloseGroup(step, g.ID) })
		}
		if spec.Rubrics {
			// Induce a few drafts, promote, merge and retire some: every
			// pool transition the store allows.
			for k := 0; k < 2; k++ {
				var rb model.Rubric
				do(func(r *store.RunTx) (err error) {
					rb, err = r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: fmt.Sprintf("draft %d.%d", step, k),
						Origin: model.RubricOrigin{Step: step, Group: 1}, Support: 1, Variance: 0.05, Rho: 0.3,
						Usage: model.RubricUsage{LastActivation: -1}, CreatedStep: step})
					return err
				})
				candidates = append(candidates, rb.ID)
			}
			do(func(r *store.RunTx) error {
				_, err := r.AppendEvent("rubric.judge", step, 1, 0, candidates[0], map[string]any{"wins": []float64{0.5, 1}})
				return err
			})
			if len(candidates) >= 3 {
				pub := candidates[0]
				do(func(r *store.RunTx) error {
					_, err := r.MoveRubric(pub, store.RubricMove{To: model.PoolPublic, Step: step})
					return err
				})
				public = append(public, pub)
				do(func(r *store.RunTx) error {
					_, err := r.MoveRubric(candidates[1], store.RubricMove{To: model.PoolMerged, Step: step, MergedInto: pub})
					return err
				})
				candidates = candidates[2:]
				do(func(r *store.RunTx) error {
					rb, err := r.Rubric(pub)
					if err != nil {
						return err
					}
					rb.Usage.Activations++
					rb.Usage.LastActivation = int64(step)
					return r.UpdateRubric(rb)
				})
			}
			if len(public) >= 2 {
				old := public[0]
				public = public[1:]
				do(func(r *store.RunTx) error {
					_, err := r.MoveRubric(old, store.RubricMove{To: model.PoolRetired, Step: step, Reason: "mastered"})
					return err
				})
			}
		}
		do(func(r *store.RunTx) error {
			return r.PutCheckpoint(model.Checkpoint{Step: step, Inline: []byte(fmt.Sprintf("policy@%d", step))})
		})
	}
	do(func(r *store.RunTx) error { return r.SetRunStatus(model.RunFinished) })
}

func writeAdvantages(t testing.TB, rng *rand.Rand, spec RunSpec, step, group uint64, leaves []model.Node, public []uint64, do DoFunc) {
	t.Helper()
	n := float64(len(leaves))
	rewards := make([]float64, len(leaves))
	for i, l := range leaves {
		rewards[i] = l.Reward
	}
	_, std := meanStd(rewards)
	shaped := make([]float64, len(leaves))
	rs := make([]float64, len(leaves))
	lambda := 0.0
	if spec.Rubrics && len(public) > 0 {
		lambda = 0.1
		sum := 0.0
		for i := range rs {
			rs[i] = float64(rng.IntN(5)) / 4
			sum += rs[i]
		}
		for i := range rs {
			rs[i] -= sum / n
		}
	}
	for i := range shaped {
		shaped[i] = rewards[i] + lambda*rs[i]
	}
	smean, sstd := meanStd(shaped)
	for i, l := range leaves {
		a := model.Advantage{Step: step, Group: group, Leaf: l.ID, Outcome: rewards[i], RubricScore: rs[i], Lambda: lambda,
			Total: shaped[i], Mean: smean, Std: sstd, Advantage: (shaped[i] - smean) / (sstd + 1e-6),
			ZeroVariance: std == 0, ZeroVarianceAfter: sstd == 0}
		if lambda > 0 {
			a.Rubrics = append([]uint64(nil), public...)
		}
		do(func(r *store.RunTx) error { return r.PutAdvantage(a) })
	}
}

func meanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, math.Sqrt(v / float64(len(xs)))
}

func repeatRun(actions []string) int {
	n := 0
	for i := len(actions) - 1; i >= 0 && actions[i] == actions[len(actions)-1]; i-- {
		n++
	}
	return n
}

// PerTx returns a DoFunc that commits every mutation in its own
// transaction and then calls after (if any).
func PerTx(t testing.TB, db *store.DB, id string, after func()) DoFunc {
	return func(fn func(*store.RunTx) error) {
		t.Helper()
		if err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			return fn(r)
		}); err != nil {
			t.Fatal(err)
		}
		if after != nil {
			after()
		}
	}
}

// OneNode creates run id with one open group at step 1 (task "t", prompt
// "p") of one root node, for tests that build the rest by hand.
func OneNode(tx *store.Tx, id string) (*store.RunTx, model.Group, model.Node, error) {
	r, err := tx.CreateRun(id, nil, nil)
	if err != nil {
		return nil, model.Group{}, model.Node{}, err
	}
	g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t", Prompt: "p"})
	if err != nil {
		return nil, g, model.Node{}, err
	}
	n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
	return r, g, n, err
}

// BenchRun builds a run of realistic events (node records with scores and
// decisions, turn ranges, advantages, rubrics) for the scan benchmarks.
func BenchRun(b testing.TB) (*store.DB, string, uint64) {
	b.Helper()
	db := storetest.Open(b)
	spec := MediumSpec("bench")
	spec.Steps, spec.Groups, spec.Tokens = 30, 8, 1
	BuildOneTx(b, db, spec)
	var last uint64
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(spec.ID)
		last = r.LastSeq()
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return db, spec.ID, last
}

// FlatGroup is a group of FlatRun: its step, how many leaves it has and,
// when not 0, how many action tokens each leaf's turn holds (ids that
// differ from leaf to leaf, which compress badly; 0: the one token 3).
type FlatGroup struct {
	Step   uint64
	Leaves int
	Tokens int
}

// FlatRun writes run id: a closed group for each of groups, in order, of
// that many such leaves, each a root.
func FlatRun(t testing.TB, db *store.DB, id string, groups ...FlatGroup) {
	t.Helper()
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun(id, nil, nil)
		if err != nil {
			return err
		}
		seed := uint32(1)
		for _, fg := range groups {
			step := fg.Step
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: "t", Prompt: "p", PromptTokens: []uint32{1, 2}})
			if err != nil {
				return err
			}
			for i := range fg.Leaves {
				n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i})
				if err != nil {
					return err
				}
				turn := model.Turn{Action: "a", ActionTokens: []uint32{3}, ActionLogprobs: []float32{-1}, Observation: "o", ObservationTokens: []uint32{4}, Done: true}
				if fg.Tokens > 0 {
					turn.ActionTokens, turn.ActionLogprobs = make([]uint32, fg.Tokens), make([]float32, fg.Tokens)
					for k := range turn.ActionTokens {
						seed = seed*1664525 + 1013904223
						turn.ActionTokens[k], turn.ActionLogprobs[k] = seed>>12, -1
					}
				}
				for _, do := range []func() error{
					func() error { return r.AppendTurns(n.ID, 0, turn) },
					func() error { return r.SetReward(n.ID, 1) },
					func() error { return r.SetNodeStatus(n.ID, model.NodeCompleted) },
					func() error {
						return r.PutAdvantage(model.Advantage{Step: step, Group: g.ID, Leaf: n.ID, Outcome: 1, Total: 1, Advantage: 0.5})
					},
				} {
					if err := do(); err != nil {
						return err
					}
				}
			}
			if err := r.CloseGroup(step, g.ID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
