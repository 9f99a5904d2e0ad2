package server

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// viewerSpec shapes a run written straight through the store, one step per
// transaction, so the viewer's tests get a 100-step run or a 2,000-node
// group in seconds. The trees look like an LLM agent's: multi-line actions
// with logprobs, long observations, process scores each interval, the best
// branch expanded, the worst pruned, GRPO advantages over the leaves.
type viewerSpec struct {
	steps, tasks int
	roots        int // branches per group
	nodes        int // a group stops expanding once it has this many nodes
	children     int // per expansion
	tokens       int // action tokens per turn
	obsLines     int // lines of each observation
	rubrics      int // rubrics put per step
	seed         uint64
}

func buildViewerRun(t testing.TB, db *store.DB, id string, spec viewerSpec) {
	t.Helper()
	rng := rand.New(rand.NewPCG(spec.seed, 7))
	conf := fmt.Sprintf(`{"tree":{"b0":%d,"k":2,"m":%d,"top_expand":1},"trainer":"viewer-fixture","lr":%g}`, spec.roots, spec.children, 1e-6*float64(spec.seed+1))
	err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(id, []byte(conf), map[string]string{"by": "viewer-fixture"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for step := uint64(1); step <= uint64(spec.steps); step++ {
		err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			for task := range spec.tasks {
				if err := fixtureGroup(r, rng, spec, step, task); err != nil {
					return err
				}
			}
			for i := range spec.rubrics {
				pool := []model.RubricPool{model.PoolCandidate, model.PoolPublic}[i%2]
				u := model.RubricUsage{LastActivation: -1}
				if pool == model.PoolPublic {
					// Running sums of (win rate, outcome) pairs, so rho is defined.
					for k := range 4 {
						x, y := rng.Float64(), float64(k%2)
						u.N++
						u.SumX, u.SumY, u.SumXY, u.SumXX, u.SumYY = u.SumX+x, u.SumY+y, u.SumXY+x*y, u.SumXX+x*x, u.SumYY+y*y
					}
					u.Activations, u.LastActivation, u.PairsJudged = 1+rng.IntN(5), int64(step), 4
				}
				rb, err := r.PutRubric(model.Rubric{Pool: pool, Text: fmt.Sprintf("step %d rubric %d: the agent %s", step, i, []string{"runs the tests before it edits", "reads the failing file first", "keeps the patch minimal", "does not repeat a command"}[i%4]), CreatedStep: step, Support: 1 + i%3, Usage: u})
				if err != nil {
					return err
				}
				if i%5 == 4 {
					if _, err := r.MoveRubric(rb.ID, store.RubricMove{To: model.PoolRetired, Step: step, Reason: "low variance"}); err != nil {
						return err
					}
				}
			}
			return r.PutCheckpoint(model.Checkpoint{Step: step, URI: fmt.Sprintf("ckpt/%d", step)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fixtureGroup grows one group breadth-first: each interval scores the
// active branches, expands the best, prunes the worst and lets the rest
// survive, until the group has spec.nodes nodes; then every branch ends.
func fixtureGroup(r *store.RunTx, rng *rand.Rand, spec viewerSpec, step uint64, task int) error {
	prompt := fmt.Sprintf("Fix the failing test in repo-%d.\n\n```\n$ go test ./pkg/\n--- FAIL: TestParse (0.00s)\n    parse_test.go:%d: got %d, want %d\n```\n\nKeep the change minimal.", task, 10+task, task, task+1)
	g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: fmt.Sprintf("task-%d", task), Prompt: prompt, Gold: "patch"})
	if err != nil {
		return err
	}
	mkTurn := func(depth, k int) model.Turn {
		tu := model.Turn{
			Action:      fmt.Sprintf("edit parse.go\n```diff\n-\treturn n\n+\treturn n + %d\n```\n# depth %d turn %d", rng.IntN(5), depth, k),
			Observation: fixtureObs(rng, spec.obsLines),
		}
		for range spec.tokens {
			tu.ActionTokens = append(tu.ActionTokens, uint32(rng.IntN(50000)))
			tu.ActionLogprobs = append(tu.ActionLogprobs, -float32(rng.ExpFloat64()))
		}
		for range 3 * spec.tokens {
			tu.ObservationTokens = append(tu.ObservationTokens, uint32(rng.IntN(50000)))
		}
		return tu
	}
	var active []model.Node
	count := 0
	for i := range spec.roots {
		n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i, Worker: "w0"})
		if err != nil {
			return err
		}
		active = append(active, n)
		count++
	}
	var leaves []tree.Leaf
	failed := false
	finish := func(n model.Node, status model.NodeStatus, reward float64) error {
		if err := r.SetReward(n.ID, reward); err != nil {
			return err
		}
		if status != model.NodePruned { // a prune decision already moved it
			if err := r.SetNodeStatus(n.ID, status); err != nil {
				return err
			}
		}
		n.Status, n.Reward, n.HasReward = status, reward, true
		leaves = append(leaves, tree.Leaf{Node: n, Reward: reward})
		return nil
	}
	for iv := 0; len(active) > 0; iv++ {
		// Advance every active branch by two turns, then score them.
		scores := make([]float64, len(active))
		for i := range active {
			n := &active[i]
			if err := r.AppendTurns(n.ID, n.Turns, mkTurn(n.Depth, 0), mkTurn(n.Depth, 1)); err != nil {
				return err
			}
			n.Turns += 2
			scores[i] = float64(rng.IntN(9)) / 8
			if err := r.Score(n.ID, model.Score{Interval: iv, Turn: n.PathLen(), Value: scores[i]}); err != nil {
				return err
			}
		}
		best, worst := 0, 0
		for i, s := range scores {
			if s > scores[best] {
				best = i
			}
			if s < scores[worst] {
				worst = i
			}
		}
		var next []model.Node
		for i, n := range active {
			last := count >= spec.nodes || n.PathLen() >= 24
			switch {
			case last:
				status, reward := model.NodeCompleted, 0.0
				if rng.Float64() < scores[i] {
					reward = 1
				}
				if rng.IntN(40) == 0 {
					status = model.NodeTruncated
				}
				if err := finish(n, status, reward); err != nil {
					return err
				}
			case i == worst && len(active) > 1:
				if err := r.Route(n.ID, model.Decision{Interval: iv, Action: model.ActionPrune, Score: scores[i], Reference: scores[best], Delta: 0.25, Rule: "relative"}); err != nil {
					return err
				}
				if err := finish(n, model.NodePruned, 0); err != nil {
					return err
				}
			case i == best || spec.nodes > 500 && scores[i] >= 0.25:
				if err := r.Route(n.ID, model.Decision{Interval: iv, Action: model.ActionExpand, Score: scores[i], Reference: scores[best], Delta: 0.25, Rule: "top", Children: spec.children}); err != nil {
					return err
				}
				for c := range spec.children {
					kid, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Parent: n.ID, Fork: n.Turns, Ordinal: c, Worker: "w1"})
					if err != nil {
						return err
					}
					next = append(next, kid)
					count++
				}
			case step == 1 && task == 0 && iv == 0 && !failed:
				// One branch's policy call fails for good: a failed node
				// in the tree, which is neither a leaf nor active.
				failed = true
				if err := r.FailNode(n.ID, "policy timeout after 120s"); err != nil {
					return err
				}
			default:
				if err := r.Route(n.ID, model.Decision{Interval: iv, Action: model.ActionSurvive, Score: scores[i], Reference: scores[best], Delta: 0.25, Rule: "middle"}); err != nil {
					return err
				}
				next = append(next, n)
			}
		}
		active = next
	}
	for _, a := range tree.Advantages(g, leaves, nil, grpo.DefaultEps) {
		if err := r.PutAdvantage(a); err != nil {
			return err
		}
	}
	return r.CloseGroup(step, g.ID)
}

// fixtureObs is test output of n lines, the kind of block a reader wants
// folded.
func fixtureObs(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString("$ go test ./pkg/\n")
	for i := range n {
		fmt.Fprintf(&b, "    parse_test.go:%d: case %d: got %d\n", 10+i, i, rng.IntN(100))
	}
	if rng.IntN(2) == 0 {
		b.WriteString("FAIL")
	} else {
		b.WriteString("ok  \tpkg\t0.01s")
	}
	return b.String()
}
