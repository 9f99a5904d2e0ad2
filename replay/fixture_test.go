package replay_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// runSpec describes a PaTR-shaped run for buildRun: several steps of
// groups grown interval by interval with tree.Route under cfg, so the
// recorded decisions are the ones the routing function gives, as a real
// trainer's would be.
type runSpec struct {
	id      string
	cfg     tree.Config
	steps   int
	groups  int // per step
	seed    uint64
	rubrics bool // ARBOR: rubric pools, shaping, custom rubric events
	tokens  int  // action tokens per turn (observation tokens are 3x)
}

func smallSpec(id string) runSpec {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta = 3, 2, 2, 1, 0.4
	cfg.RepeatPrune, cfg.MaxTurns = 3, 8
	return runSpec{id: id, cfg: cfg, steps: 2, groups: 2, seed: 1, rubrics: true, tokens: 3}
}

func mediumSpec(id string) runSpec {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta = 4, 3, 2, 2, 0.5
	cfg.RepeatPrune, cfg.MaxTurns, cfg.MaxActive = 4, 15, 5
	return runSpec{id: id, cfg: cfg, steps: 4, groups: 3, seed: 7, rubrics: true, tokens: 5}
}

// doFunc runs one mutation on the run. buildRun calls it once per store
// mutation, so a test may commit each in its own transaction and look at
// the store in between, or batch them.
type doFunc func(func(r *store.RunTx) error)

// branchState is the trainer's in-memory view of an active branch.
type branchState struct {
	node    model.Node
	actions []string // whole path, for RepeatRun
}

// createRun creates spec's run, recording its tree config the way a
// trainer does (the tree config under "tree", beside its own members).
func createRun(tx *store.Tx, spec runSpec) (*store.RunTx, error) {
	conf, err := json.Marshal(map[string]any{"tree": spec.cfg, "trainer": "fixture"})
	if err != nil {
		return nil, err
	}
	return tx.CreateRun(spec.id, conf, map[string]string{"by": "fixture"})
}

// buildRun creates spec's run in one transaction, then grows it through
// do, one call per store mutation.
func buildRun(t testing.TB, db *store.DB, spec runSpec, do doFunc) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error { _, err := createRun(tx, spec); return err }); err != nil {
		t.Fatal(err)
	}
	growRun(t, spec, do)
}

// buildOneTx builds the whole run in a single transaction (fast, for tests
// that only read the result).
func buildOneTx(t testing.TB, db *store.DB, spec runSpec) {
	t.Helper()
	err := db.Update(func(tx *store.Tx) error {
		r, err := createRun(tx, spec)
		if err != nil {
			return err
		}
		var first error
		growRun(t, spec, func(fn func(*store.RunTx) error) {
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

func growRun(t testing.TB, spec runSpec, do doFunc) {
	t.Helper()
	rng := rand.New(rand.NewPCG(spec.seed, 99))
	mkTurn := func(action string, done bool) model.Turn {
		tu := model.Turn{Action: action, Observation: "obs-" + action, Reward: 0, Done: done}
		for i := 0; i < spec.tokens; i++ {
			tu.ActionTokens = append(tu.ActionTokens, uint32(rng.IntN(50000)))
			tu.ActionLogprobs = append(tu.ActionLogprobs, -rng.Float32()*3)
		}
		for i := 0; i < 3*spec.tokens; i++ {
			tu.ObservationTokens = append(tu.ObservationTokens, uint32(rng.IntN(50000)))
		}
		return tu
	}
	var public []uint64
	var candidates []uint64
	for step := uint64(1); step <= uint64(spec.steps); step++ {
		for gi := 0; gi < spec.groups; gi++ {
			var g model.Group
			do(func(r *store.RunTx) (err error) {
				g, err = r.OpenGroup(store.GroupSpec{Step: step, Task: fmt.Sprintf("task-%d", gi), Prompt: "go to the goal", Gold: "goal"})
				return err
			})
			var active []*branchState
			for i := 0; i < spec.cfg.B0; i++ {
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
					k := 1 + rng.IntN(spec.cfg.K)
					var ts []model.Turn
					finished, status := false, model.NodeCompleted
					for j := 0; j < k; j++ {
						a := []string{"L", "R", "U", "D"}[rng.IntN(4)]
						if len(b.actions) > 0 && rng.IntN(3) > 0 {
							a = b.actions[len(b.actions)-1] // agents repeat themselves
						}
						b.actions = append(b.actions, a)
						done := rng.IntN(9) == 0
						if !done && spec.cfg.MaxTurns > 0 && len(b.actions) >= spec.cfg.MaxTurns {
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
				decisions := tree.Route(in, spec.cfg)
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
		if spec.rubrics {
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

func writeAdvantages(t testing.TB, rng *rand.Rand, spec runSpec, step, group uint64, leaves []model.Node, public []uint64, do doFunc) {
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
	if spec.rubrics && len(public) > 0 {
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

// perTx returns a doFunc that commits every mutation in its own
// transaction and then calls after (if any).
func perTx(t testing.TB, db *store.DB, id string, after func()) doFunc {
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

// snapshot reads the live store's records into a State, for comparison
// with what replay rebuilds from the log.
func snapshot(t testing.TB, r *store.RunTx) *replay.State {
	t.Helper()
	s := replay.NewState(r.ID())
	s.Seq = r.LastSeq()
	var err error
	if s.Info, err = r.Info(); err != nil {
		t.Fatal(err)
	}
	groups, err := r.Groups(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		s.Groups[g.ID] = g
		nodes, err := r.GroupNodes(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			s.Nodes[n.ID] = n
		}
	}
	rbs, err := r.Rubrics("")
	if err != nil {
		t.Fatal(err)
	}
	for _, rb := range rbs {
		s.Rubrics[rb.ID] = rb
	}
	advs, err := r.Advantages(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range advs {
		s.Advantages[replay.AdvKey{Step: a.Step, Group: a.Group, Leaf: a.Leaf}] = a
	}
	for step := uint64(1); ; step++ {
		c, err := r.Checkpoint(step)
		if err != nil || c.Step != step {
			break
		}
		s.Checkpoints[step] = c
	}
	return s
}

// liveExtras is what the State exposes through methods: the frontier and
// each node's children, read from the store.
type liveExtras struct {
	frontier []uint64
	children map[uint64][]uint64
	order    map[uint64][]uint64 // group → node ids in store.RunTx.GroupNodes order
}

func readExtras(t testing.TB, r *store.RunTx, s *replay.State) liveExtras {
	t.Helper()
	f, err := r.Frontier()
	if err != nil {
		t.Fatal(err)
	}
	ex := liveExtras{frontier: f, children: map[uint64][]uint64{}, order: map[uint64][]uint64{}}
	for _, g := range s.Groups {
		nodes, err := r.GroupNodes(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			ex.order[g.ID] = append(ex.order[g.ID], n.ID)
		}
	}
	for id := range s.Nodes {
		kids, err := r.Children(id)
		if err != nil {
			t.Fatal(err)
		}
		ex.children[id] = kids
	}
	return ex
}

// diffState reports how got (rebuilt) differs from want (live).
func diffState(got, want *replay.State, ex liveExtras) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if got.Seq != want.Seq {
		add("seq %d, want %d", got.Seq, want.Seq)
	}
	if !reflect.DeepEqual(got.Info, want.Info) {
		add("run record %+v, want %+v", got.Info, want.Info)
	}
	cmpMap(&out, "group", got.Groups, want.Groups)
	cmpMap(&out, "node", got.Nodes, want.Nodes)
	cmpMap(&out, "rubric", got.Rubrics, want.Rubrics)
	cmpMap(&out, "advantage", got.Advantages, want.Advantages)
	cmpMap(&out, "checkpoint", got.Checkpoints, want.Checkpoints)
	if f := got.Frontier(); !equalIDs(f, ex.frontier) {
		add("frontier %v, want %v", f, ex.frontier)
	}
	for id, want := range ex.children {
		if c := got.Children(id); !equalIDs(c, want) {
			add("children of %d: %v, want %v", id, c, want)
		}
	}
	// Each group's node order is the store's breadth-first one.
	for id, want := range ex.order {
		var ids []uint64
		for _, n := range got.GroupNodes(id) {
			ids = append(ids, n.ID)
		}
		if !reflect.DeepEqual(ids, want) {
			add("group %d nodes in order %v, want %v", id, ids, want)
		}
	}
	return out
}

func cmpMap[K comparable, V any](out *[]string, what string, got, want map[K]V) {
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			*out = append(*out, fmt.Sprintf("%s %v missing", what, k))
			continue
		}
		if !reflect.DeepEqual(g, w) {
			*out = append(*out, fmt.Sprintf("%s %v:\n  got  %+v\n  want %+v", what, k, g, w))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			*out = append(*out, fmt.Sprintf("%s %v should not exist yet", what, k))
		}
	}
}

func equalIDs(a, b []uint64) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	a, b = append([]uint64(nil), a...), append([]uint64(nil), b...)
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return reflect.DeepEqual(a, b)
}

// oneNode creates run id with one open group at step 1 (task "t", prompt
// "p") of one root node, for tests that build the rest by hand.
func oneNode(tx *store.Tx, id string) (*store.RunTx, model.Group, model.Node, error) {
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
