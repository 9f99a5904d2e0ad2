package tree_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// The scripted fakes make a tree that can be worked out by hand: the
// policy's action names the node and own-turn index it was sampled for, the
// env ends or rewards exactly the (node, index) pairs of a table, and the
// scorer answers only the (node, path length) pairs of a table, failing on
// any other, so the engine scoring a branch it should not is an error.

type scriptPolicy struct{}

func (scriptPolicy) Act(_ context.Context, key rollout.TurnKey, _ rollout.Task, hist []model.Turn) (rollout.Move, error) {
	if key.Path != len(hist) {
		return rollout.Move{}, fmt.Errorf("key path %d with %d turns of history", key.Path, len(hist))
	}
	return rollout.Move{Text: fmt.Sprintf("n%d.%d", key.Node, key.Index),
		Tokens: []uint32{uint32(key.Node), uint32(key.Index)}, Logprobs: []float32{-1, -2}}, nil
}

type outcome struct {
	reward float64
	done   bool
}

type scriptEnv struct{ outcomes map[[2]int]outcome }

type scriptEpisode struct{ env *scriptEnv }

func (e *scriptEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	return scriptEpisode{e}, nil
}

func (e *scriptEnv) Restore(context.Context, rollout.Task, []model.Turn, []byte) (rollout.Episode, error) {
	return scriptEpisode{e}, nil
}

func (ep scriptEpisode) Step(_ context.Context, key rollout.TurnKey, mv rollout.Move) (rollout.Observation, error) {
	o := ep.env.outcomes[[2]int{int(key.Node), key.Index}]
	return rollout.Observation{Text: "o" + mv.Text, Tokens: []uint32{uint32(key.Node)}, Reward: o.reward, Done: o.done}, nil
}

func (scriptEpisode) State() []byte { return nil }

type scriptScorer struct{ scores map[[2]int]float64 }

func (s scriptScorer) Score(_ context.Context, _ rollout.Task, hist []model.Turn) (float64, error) {
	node := int(hist[len(hist)-1].ActionTokens[0])
	v, ok := s.scores[[2]int{node, len(hist)}]
	if !ok {
		return 0, fmt.Errorf("scorer: node %d at path %d was not expected to be scored", node, len(hist))
	}
	return v, nil
}

// TestRolloutScripted grows one tree whose every record is worked out by
// hand from docs/methods.md (B0=4, K=2, M=2, top-1 expansion, Delta 0.5, max
// rule, MaxTurns 6):
//
//	interval 0  roots 1–4 take 2 turns each; 4 ends on its 2nd (reward 1),
//	            2 earns .25 on its 1st.
//	            scores 1:.75 2:.125 3:.5 → ref .75, prune below .25:
//	            2 pruned, 1 expands into 5,6 (fork 2), 3 survives.
//	interval 1  3 takes turns 3–4 (reward .5 on its 3rd), 5 ends on its 1st
//	            (reward 1), 6 takes 2. scores 3:.25 6:.625 → ref .625, prune
//	            below .125: none; 6 expands into 7,8 (fork 2), 3 survives.
//	interval 2  3, 7, 8 take 2 turns and reach path 6 = MaxTurns: 3 and 7
//	            are truncated, 8 ends on its 2nd turn (reward 1): completed.
//
// Leaves 2,3,4,5,7,8 with rewards .25, .5, 1, 1, 0, 1 (a pruned leaf keeps
// what its path earned).
func TestRolloutScripted(t *testing.T) {
	for _, mode := range []tree.CommitMode{tree.CommitInterval, tree.CommitTurn} {
		t.Run(fmt.Sprint("commit=", mode), func(t *testing.T) { testRolloutScripted(t, mode) })
	}
}

func testRolloutScripted(t *testing.T, mode tree.CommitMode) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta, cfg.RepeatPrune, cfg.MaxTurns = 4, 2, 2, 1, 0.5, 0, 6
	db := storetest.Open(t)
	newRun(t, db, "r", cfg)
	type call struct{ step, interval, turns, active int }
	var calls []call
	o := tree.Options{
		Config: cfg,
		Policy: scriptPolicy{},
		Env: &scriptEnv{outcomes: map[[2]int]outcome{
			{4, 1}: {1, true}, {5, 0}: {1, true}, {3, 2}: {0.5, false}, {8, 1}: {1, true}, {2, 0}: {0.25, false},
		}},
		Scorer: scriptScorer{scores: map[[2]int]float64{
			{1, 2}: 0.75, {2, 2}: 0.125, {3, 2}: 0.5, {3, 4}: 0.25, {6, 4}: 0.625,
		}},
		Commit:  mode,
		Barrier: tree.BarrierStep,
		OnInterval: func(step uint64, interval, turns int) {
			calls = append(calls, call{int(step), interval, turns, len(frontier(t, db, "r"))})
		},
	}
	e := mustEngine(t, db, "r", o)
	res, err := e.Rollout(context.Background(), 1, []rollout.Task{{ID: "t", Prompt: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.EnvSteps != 19 {
		t.Errorf("EnvSteps = %d, want 19", res.EnvSteps)
	}
	if want := []call{{1, 0, 8, 3}, {1, 1, 5, 3}, {1, 2, 6, 0}}; !reflect.DeepEqual(calls, want) {
		t.Errorf("OnInterval calls (step, interval, turns, active after) = %v, want %v", calls, want)
	}

	const d = 0.5
	sc := func(iv, turn int, v float64) model.Score { return model.Score{Interval: iv, Turn: turn, Value: v} }
	dec := func(iv int, action model.Action, s, ref float64, rule string, children int) model.Decision {
		return model.Decision{Interval: iv, Action: action, Score: s, Reference: ref, Delta: d, Rule: rule, Children: children}
	}
	node := func(id, parent uint64, fork, base, depth, ordinal int, st model.NodeStatus, turns int) model.Node {
		return model.Node{ID: id, Step: 1, Group: 1, Parent: parent, Fork: fork, Base: base, Depth: depth, Ordinal: ordinal, Status: st, Turns: turns}
	}
	leaf := func(n model.Node, r float64) model.Node { n.HasReward, n.Reward = true, r; return n }
	n1 := node(1, 0, 0, 0, 0, 0, model.NodeExpanded, 2)
	n1.Scores = []model.Score{sc(0, 2, 0.75)}
	n1.Decisions = []model.Decision{dec(0, "expand", 0.75, 0.75, tree.RuleTop, 2)}
	n2 := leaf(node(2, 0, 0, 0, 0, 1, model.NodePruned, 2), 0.25)
	n2.Scores = []model.Score{sc(0, 2, 0.125)}
	n2.Decisions = []model.Decision{dec(0, "prune", 0.125, 0.75, tree.RuleMax, 0)}
	n3 := leaf(node(3, 0, 0, 0, 0, 2, model.NodeTruncated, 6), 0.5)
	n3.Scores = []model.Score{sc(0, 2, 0.5), sc(1, 4, 0.25)}
	n3.Decisions = []model.Decision{dec(0, "survive", 0.5, 0.75, tree.RuleSurvive, 0), dec(1, "survive", 0.25, 0.625, tree.RuleSurvive, 0)}
	n4 := leaf(node(4, 0, 0, 0, 0, 3, model.NodeCompleted, 2), 1)
	n5 := leaf(node(5, 1, 2, 2, 1, 0, model.NodeCompleted, 1), 1)
	n6 := node(6, 1, 2, 2, 1, 1, model.NodeExpanded, 2)
	n6.Scores = []model.Score{sc(1, 4, 0.625)}
	n6.Decisions = []model.Decision{dec(1, "expand", 0.625, 0.625, tree.RuleTop, 2)}
	n7 := leaf(node(7, 6, 2, 4, 2, 0, model.NodeTruncated, 2), 0)
	n8 := leaf(node(8, 6, 2, 4, 2, 1, model.NodeCompleted, 2), 1)
	wantNodes := []model.Node{n1, n2, n3, n4, n5, n6, n7, n8}

	got := dumpRun(t, db, "r")
	if len(got.Nodes) != len(wantNodes) {
		t.Fatalf("%d nodes, want %d: %+v", len(got.Nodes), len(wantNodes), got.Nodes)
	}
	for i := range wantNodes {
		got.Nodes[i].TurnRanges = wantNodes[i].TurnRanges // where the store keeps the turns is its own affair
		if !reflect.DeepEqual(got.Nodes[i], wantNodes[i]) {
			t.Errorf("node %d:\n got  %+v\n want %+v", wantNodes[i].ID, got.Nodes[i], wantNodes[i])
		}
	}
	wantGroup := model.Group{ID: 1, Step: 1, Task: "t", Prompt: "p", Roots: []uint64{1, 2, 3, 4}, Status: model.GroupClosed, Interval: 3}
	if len(got.Groups) != 1 || !reflect.DeepEqual(got.Groups[0], wantGroup) {
		t.Errorf("groups = %+v, want [%+v]", got.Groups, wantGroup)
	}
	if len(got.Frontier) != 0 {
		t.Errorf("frontier after Rollout = %v, want empty", got.Frontier)
	}
	if want := map[uint64][]uint64{1: {5, 6}, 6: {7, 8}}; !reflect.DeepEqual(nonEmpty(got.Children), want) {
		t.Errorf("children = %v, want %v", nonEmpty(got.Children), want)
	}

	// Children inherit the parent's whole path; each turn is stored once, by
	// the node that sampled it.
	paths := map[uint64]string{}
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for _, n := range got.Nodes {
			tr, err := r.Trajectory(n.ID)
			if err != nil {
				return err
			}
			s := ""
			for _, pt := range tr {
				s += pt.Action + " "
				if pt.Observation != "o"+pt.Action || pt.Node != uint64(pt.ActionTokens[0]) || pt.Index != int(pt.ActionTokens[1]) {
					t.Errorf("node %d: turn %+v stored by the wrong node or index", n.ID, pt)
				}
			}
			paths[n.ID] = s
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := map[uint64]string{
		1: "n1.0 n1.1 ", 2: "n2.0 n2.1 ", 3: "n3.0 n3.1 n3.2 n3.3 n3.4 n3.5 ", 4: "n4.0 n4.1 ",
		5: "n1.0 n1.1 n5.0 ", 6: "n1.0 n1.1 n6.0 n6.1 ",
		7: "n1.0 n1.1 n6.0 n6.1 n7.0 n7.1 ", 8: "n1.0 n1.1 n6.0 n6.1 n8.0 n8.1 ",
	}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Errorf("trajectories = %v, want %v", paths, wantPaths)
	}

	// Advantages over the six leaves, computed here from the rewards above.
	leaves := []uint64{2, 3, 4, 5, 7, 8}
	rewards := []float64{0.25, 0.5, 1, 1, 0, 1}
	adv, mean, std := refGRPO(rewards, grpo.DefaultEps)
	if len(got.Adv) != len(leaves) {
		t.Fatalf("%d advantage records, want %d", len(got.Adv), len(leaves))
	}
	for i, a := range got.Adv {
		want := model.Advantage{Step: 1, Group: 1, Leaf: leaves[i], Outcome: rewards[i], Total: rewards[i],
			Mean: a.Mean, Std: a.Std, Advantage: a.Advantage}
		if !reflect.DeepEqual(a, want) || !near(a.Mean, mean) || !near(a.Std, std) || !near(a.Advantage, adv[i]) {
			t.Errorf("advantage %d = %+v, want %+v with mean %v std %v advantage %v", i, a, want, mean, std, adv[i])
		}
	}
	if len(res.Groups) != 1 || !reflect.DeepEqual(res.Groups[0].Advantages, got.Adv) || res.Groups[0].Group.Status != model.GroupClosed {
		t.Errorf("StepResult.Groups = %+v, want the stored group and advantages", res.Groups)
	}
	var resLeaves []uint64
	for _, n := range res.Groups[0].Leaves {
		resLeaves = append(resLeaves, n.ID)
	}
	if !reflect.DeepEqual(resLeaves, leaves) {
		t.Errorf("StepResult leaves = %v, want %v", resLeaves, leaves)
	}
}

func nonEmpty(m map[uint64][]uint64) map[uint64][]uint64 {
	out := map[uint64][]uint64{}
	for k, v := range m {
		if len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

func frontier(t testing.TB, db *store.DB, run string) []model.Node {
	t.Helper()
	var ns []model.Node
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		ns, err = r.FrontierNodes()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// intervalLog is an OnInterval hook that checks, after every committed
// interval, that intervals count up from 0 within a step and that no group
// has more active branches than MaxActive.
type intervalLog struct {
	t         testing.TB
	db        *store.DB
	run       string
	cfg       tree.Config
	step      uint64
	next      int
	turns     int
	maxActive int // the widest group seen
}

func (l *intervalLog) hook(step uint64, interval, turns int) {
	if step != l.step {
		l.step, l.next = step, 0
	}
	if interval != l.next {
		l.t.Errorf("step %d: OnInterval reported interval %d, want %d", step, interval, l.next)
	}
	l.next = interval + 1
	l.turns += turns
	per := map[uint64]int{}
	for _, n := range frontier(l.t, l.db, l.run) {
		per[n.Group]++
	}
	for g, n := range per {
		l.maxActive = max(l.maxActive, n)
		if l.cfg.MaxActive > 0 && n > l.cfg.MaxActive {
			l.t.Errorf("step %d interval %d: group %d has %d active branches, MaxActive %d", step, interval, g, n, l.cfg.MaxActive)
		}
	}
}

// coverage counts what the invariant runs exercised, so a change to the
// fakes that stops producing some case fails instead of silently testing
// less.
type coverage map[string]int

// checkStep verifies every group of step against docs/methods.md and the
// config, recomputing scores, routing and advantages from the stored
// trajectories.
func checkStep(t *testing.T, db *store.DB, run string, cfg tree.Config, step uint64, ntasks int, res *tree.StepResult, cov coverage) {
	t.Helper()
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		groups, err := r.Groups(step)
		if err != nil {
			return err
		}
		if len(groups) != ntasks || len(res.Groups) != ntasks {
			t.Errorf("step %d: %d groups stored, %d returned, want %d", step, len(groups), len(res.Groups), ntasks)
		}
		front, err := r.Frontier()
		if err != nil {
			return err
		}
		if len(front) != 0 {
			t.Errorf("step %d: frontier %v after Rollout, want empty", step, front)
		}
		turns := 0
		for gi, g := range groups {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				turns += n.Turns
			}
			leaves := checkGroup(t, r, cfg, g, nodes, cov)
			if gi < len(res.Groups) {
				var ids []uint64
				for _, n := range res.Groups[gi].Leaves {
					ids = append(ids, n.ID)
				}
				if !reflect.DeepEqual(ids, leaves) {
					t.Errorf("group %d: StepResult leaves %v, stored leaves %v", g.ID, ids, leaves)
				}
			}
		}
		if res.EnvSteps != turns {
			t.Errorf("step %d: EnvSteps %d, turns stored %d", step, res.EnvSteps, turns)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkGroup returns the group's leaf ids in id order.
func checkGroup(t *testing.T, r *store.RunTx, cfg tree.Config, g model.Group, nodes []model.Node, cov coverage) []uint64 {
	t.Helper()
	task := rollout.Task{ID: g.Task, Prompt: g.Prompt, Gold: g.Gold, Meta: g.Meta}
	if g.Status != model.GroupClosed {
		t.Errorf("group %d is %s after Rollout", g.ID, g.Status)
	}
	if len(g.Roots) != cfg.B0 {
		t.Errorf("group %d has %d roots, want B0 = %d", g.ID, len(g.Roots), cfg.B0)
	}
	byID := map[uint64]model.Node{}
	paths := map[uint64][]model.Turn{}
	for _, n := range nodes {
		byID[n.ID] = n
		tr, err := r.Trajectory(n.ID)
		if err != nil {
			t.Fatal(err)
		}
		h := make([]model.Turn, len(tr))
		for i := range tr {
			h[i] = tr[i].Turn
		}
		paths[n.ID] = h
	}
	// created is the interval a node was born in: 0 for roots, the one
	// after its parent's expansion for children.
	created := func(n model.Node) int {
		if n.Parent == 0 {
			return 0
		}
		p := byID[n.Parent]
		return p.Decisions[len(p.Decisions)-1].Interval + 1
	}
	routedAt := map[int][]model.Node{}
	var leaves []uint64
	var rewards []float64
	for i, n := range nodes {
		cov["status:"+string(n.Status)]++
		path := paths[n.ID]
		last := path[len(path)-1]
		if n.Parent == 0 && (n.Ordinal != i || n.Fork != 0) {
			t.Errorf("root %d: ordinal %d fork %d", n.ID, n.Ordinal, n.Fork)
		}
		if n.Turns < 1 {
			t.Errorf("node %d has no turns of its own", n.ID)
		}
		if cfg.MaxTurns > 0 && n.PathLen() > cfg.MaxTurns {
			t.Errorf("node %d: path %d past MaxTurns %d", n.ID, n.PathLen(), cfg.MaxTurns)
		}
		if n.Parent != 0 {
			p := byID[n.Parent]
			if p.Status != model.NodeExpanded || n.Fork != p.Turns || n.Base != p.PathLen() || n.Depth != p.Depth+1 {
				t.Errorf("child %d of %d: fork %d base %d depth %d; parent %s with %d turns, path %d, depth %d",
					n.ID, p.ID, n.Fork, n.Base, n.Depth, p.Status, p.Turns, p.PathLen(), p.Depth)
			}
			if !reflect.DeepEqual(path[:p.PathLen()], paths[p.ID]) {
				t.Errorf("child %d does not inherit its parent %d's path", n.ID, p.ID)
			}
		}
		var sum float64
		for _, tu := range path {
			sum += tu.Reward
		}
		if cfg.NoScoring {
			if n.Parent != 0 || len(n.Scores) != 0 || len(n.Decisions) != 0 {
				t.Errorf("GRPO node %d: parent %d, %d scores, %d decisions", n.ID, n.Parent, len(n.Scores), len(n.Decisions))
			}
		} else {
			checkRouting(t, cfg, task, n, path, created(n), cov)
			for _, dd := range n.Decisions {
				routedAt[dd.Interval] = append(routedAt[dd.Interval], n)
			}
		}
		switch n.Status {
		case model.NodeExpanded:
			kids, err := r.Children(n.ID)
			if err != nil {
				t.Fatal(err)
			}
			d := n.Decisions[len(n.Decisions)-1]
			if d.Action != model.ActionExpand || d.Children != len(kids) || n.HasReward {
				t.Errorf("expanded node %d: last decision %+v, %d children, has reward %t", n.ID, d, len(kids), n.HasReward)
			}
			for o, k := range kids {
				if byID[k].Ordinal != o {
					t.Errorf("child %d of %d has ordinal %d, want %d", k, n.ID, byID[k].Ordinal, o)
				}
			}
			continue
		case model.NodeCompleted:
			if !last.Done {
				t.Errorf("completed node %d: last turn not done", n.ID)
			}
		case model.NodeTruncated:
			if last.Done || n.PathLen() != cfg.MaxTurns {
				t.Errorf("truncated node %d: done %t, path %d, MaxTurns %d", n.ID, last.Done, n.PathLen(), cfg.MaxTurns)
			}
		case model.NodePruned:
			if last.Done || n.Decisions[len(n.Decisions)-1].Action != model.ActionPrune {
				t.Errorf("pruned node %d: done %t, decisions %+v", n.ID, last.Done, n.Decisions)
			}
		default:
			t.Errorf("node %d is %s after Rollout", n.ID, n.Status)
			continue
		}
		if !n.HasReward || !near(n.Reward, sum) {
			t.Errorf("leaf %d: reward %v (set %t), want the path's env rewards %v", n.ID, n.Reward, n.HasReward, sum)
		}
		if n.Reward != 0 && !last.Done {
			cov["unfinished leaf with a reward"]++
		}
		leaves = append(leaves, n.ID)
		rewards = append(rewards, n.Reward)
	}
	if cfg.NoScoring && len(nodes) != cfg.B0 {
		t.Errorf("GRPO group %d has %d nodes, want exactly G = %d", g.ID, len(nodes), cfg.B0)
	}

	// Routing is Route over exactly the branches routed at each interval.
	for iv, ns := range routedAt {
		in := make([]tree.Branch, len(ns))
		for i, n := range ns {
			s := scoreAt(n, iv)
			in[i] = tree.Branch{Node: n.ID, Score: s.Value, RepeatRun: repeatRun(paths[n.ID][:s.Turn])}
		}
		want := tree.Route(in, cfg)
		if tree.ActiveAfter(want) > cfg.MaxActive && cfg.MaxActive > 0 {
			t.Errorf("group %d interval %d: %d active after routing, MaxActive %d", g.ID, iv, tree.ActiveAfter(want), cfg.MaxActive)
		}
		for i, n := range ns {
			got := decisionAt(n, iv)
			w := want[i]
			if got.Action != w.Action || got.Rule != w.Rule || got.Children != w.Children || got.Score != w.Score || got.Reference != w.Reference {
				t.Errorf("group %d interval %d node %d: decision %+v, Route gives %+v", g.ID, iv, n.ID, got, w)
			}
			cov["rule:"+w.Rule]++
		}
	}

	// Advantages over every leaf, computed here.
	sortTogether(leaves, rewards)
	advs, err := r.Advantages(g.Step, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	adv, mean, std := refGRPO(rewards, grpo.DefaultEps)
	zero := true
	for _, x := range rewards {
		zero = zero && x == rewards[0]
	}
	cov[fmt.Sprint("zero-variance:", zero)]++
	if len(advs) != len(leaves) {
		t.Errorf("group %d: %d advantage records for %d leaves", g.ID, len(advs), len(leaves))
		return leaves
	}
	for i, a := range advs {
		if a.Leaf != leaves[i] || a.Outcome != rewards[i] || a.Total != rewards[i] || a.Lambda != 0 || a.RubricScore != 0 ||
			!near(a.Mean, mean) || !near(a.Std, std) || !near(a.Advantage, adv[i]) || a.ZeroVariance != zero || a.ZeroVarianceAfter != zero {
			t.Errorf("group %d advantage %+v; want leaf %d reward %v mean %v std %v advantage %v zero-variance %t",
				g.ID, a, leaves[i], rewards[i], mean, std, adv[i], zero)
		}
	}
	return leaves
}

// checkRouting checks a node's scores and decisions: one of each per
// interval from its birth, each taken after exactly K more turns, the score
// the scorer gives the stored path, and a final path length that fits the
// node's status.
func checkRouting(t *testing.T, cfg tree.Config, task rollout.Task, n model.Node, path []model.Turn, born int, cov coverage) {
	t.Helper()
	if len(n.Scores) != len(n.Decisions) {
		t.Errorf("node %d: %d scores, %d decisions", n.ID, len(n.Scores), len(n.Decisions))
		return
	}
	for j, s := range n.Scores {
		d := n.Decisions[j]
		if s.Interval != born+j || d.Interval != s.Interval || s.Value != d.Score || d.Delta != cfg.Delta {
			t.Errorf("node %d (born at interval %d): score %+v decision %+v at position %d", n.ID, born, s, d, j)
		}
		if s.Turn != n.Base+(j+1)*cfg.K {
			t.Errorf("node %d: score %d at path %d, want %d (K = %d turns per interval)", n.ID, j, s.Turn, n.Base+(j+1)*cfg.K, cfg.K)
		}
		if want := hashScore(task, path[:min(s.Turn, len(path))]); s.Value != want {
			t.Errorf("node %d: score %v at path %d, the scorer gives %v", n.ID, s.Value, s.Turn, want)
		}
		if j < len(n.Scores)-1 && d.Action != model.ActionSurvive {
			t.Errorf("node %d: decision %d is %s but the node went on", n.ID, j, d.Action)
		}
	}
	end := n.Base // path length when its last interval began
	if k := len(n.Scores); k > 0 {
		end = n.Scores[k-1].Turn
	}
	switch n.Status {
	case model.NodeExpanded, model.NodePruned:
		if len(n.Scores) == 0 || n.PathLen() != end {
			t.Errorf("%s node %d: path %d, last scored at %d", n.Status, n.ID, n.PathLen(), end)
		}
	case model.NodeCompleted, model.NodeTruncated:
		if k := len(n.Decisions); k > 0 && n.Decisions[k-1].Action != model.ActionSurvive {
			t.Errorf("%s node %d: last decision %+v", n.Status, n.ID, n.Decisions[k-1])
		}
		if n.PathLen() <= end || n.PathLen() > end+cfg.K {
			t.Errorf("%s node %d: path %d, want in (%d, %d]", n.Status, n.ID, n.PathLen(), end, end+cfg.K)
		}
	}
}

func scoreAt(n model.Node, iv int) model.Score {
	for _, s := range n.Scores {
		if s.Interval == iv {
			return s
		}
	}
	return model.Score{Value: math.NaN()}
}

func decisionAt(n model.Node, iv int) model.Decision {
	for _, d := range n.Decisions {
		if d.Interval == iv {
			return d
		}
	}
	return model.Decision{}
}

func repeatRun(h []model.Turn) int {
	n := 0
	for i := len(h) - 1; i >= 0 && h[i].Action == h[len(h)-1].Action; i-- {
		n++
	}
	return n
}

func sortTogether(ids []uint64, vs []float64) {
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

// invariantConfigs cover both prune rules, repeat pruning, the width cap,
// truncation and several K, M, TopExpand.
func invariantConfigs() map[string]tree.Config {
	c := func(f func(*tree.Config)) tree.Config {
		cfg := tree.DefaultConfig()
		f(&cfg)
		return cfg
	}
	return map[string]tree.Config{
		"defaults-k2": c(func(c *tree.Config) { c.K = 2; c.MaxTurns = 12 }),
		"median-k1-m3": c(func(c *tree.Config) {
			c.PruneRule, c.Delta, c.K, c.M, c.TopExpand, c.RepeatPrune, c.MaxTurns, c.MaxActive = tree.PruneMedian, 0.125, 1, 3, 1, 2, 8, 6
		}),
		"max-k3-cap5": c(func(c *tree.Config) {
			c.B0, c.Delta, c.K, c.TopExpand, c.RepeatPrune, c.MaxTurns, c.MaxActive = 3, 0.25, 3, 3, 3, 10, 5
		}),
		"wide-no-cap": c(func(c *tree.Config) {
			c.B0, c.Delta, c.K, c.M, c.TopExpand, c.RepeatPrune, c.MaxTurns = 2, 1, 2, 2, 2, 0, 9
		}),
	}
}

// TestRolloutInvariants grows trees over the hash fakes under several
// configs and both commit modes (each with its own seed), and checks every record against
// docs/methods.md: tree shape, forks and inherited prefixes, statuses, rewards,
// scores, routing re-run on the stored scores, the width cap after every
// interval, truncation, advantages and env-step accounting.
func TestRolloutInvariants(t *testing.T) {
	cov := coverage{}
	db := storetest.Open(t)
	for name, cfg := range invariantConfigs() {
		for _, mode := range []tree.CommitMode{tree.CommitInterval, tree.CommitTurn} {
			seed := int64(mode) + 1
			cfg.Seed = seed
			run := fmt.Sprintf("%s-s%d-c%d", name, seed, mode)
			newRun(t, db, run, cfg)
			log := &intervalLog{t: t, db: db, run: run, cfg: cfg}
			o := hashOpts(cfg, mode, seed%2 == 0, nil)
			o.OnInterval = log.hook
			e := mustEngine(t, db, run, o)
			total := 0
			steps := uint64(1)
			if seed == 1 {
				steps = 2 // a second step in the same run: ids go on, the first step is left alone
			}
			for step := uint64(1); step <= steps; step++ {
				res, err := e.Rollout(context.Background(), step, tasks(3))
				if err != nil {
					t.Fatalf("%s step %d: %v", run, step, err)
				}
				if res.Step != step {
					t.Errorf("%s: StepResult.Step %d, want %d", run, res.Step, step)
				}
				checkStep(t, db, run, cfg, step, 3, res, cov)
				total += res.EnvSteps
			}
			if log.turns != total {
				t.Errorf("%s: OnInterval reported %d turns, EnvSteps %d", run, log.turns, total)
			}
			if cfg.MaxActive > 0 && log.maxActive == cfg.MaxActive {
				cov["width-cap reached"]++
			}
		}
	}
	for _, k := range []string{"status:expanded", "status:completed", "status:pruned", "status:truncated",
		"rule:top", "rule:survive", "rule:max", "rule:median", "rule:repeat", "rule:width-cap",
		"zero-variance:true", "zero-variance:false", "width-cap reached", "unfinished leaf with a reward"} {
		if cov[k] == 0 {
			t.Errorf("no run exercised %s (coverage %v)", k, cov)
		}
	}
	t.Logf("coverage: %v", cov)
}

// TestRolloutGRPO: with NoScoring and B0 = G every group is exactly G
// independent root trajectories run to their end, with no scores,
// decisions or children, and GRPO advantages over the G.
func TestRolloutGRPO(t *testing.T) {
	cfg := tree.DefaultConfig()
	cfg.NoScoring, cfg.B0, cfg.K, cfg.MaxTurns, cfg.Seed = true, 6, 3, 10, 5
	cov := coverage{}
	for _, mode := range []tree.CommitMode{tree.CommitInterval, tree.CommitTurn} {
		db := storetest.Open(t)
		newRun(t, db, "grpo", cfg)
		o := hashOpts(cfg, mode, mode == tree.CommitTurn, nil)
		if o.Scorer != nil {
			t.Fatal("hashOpts gave a scorer under NoScoring")
		}
		e := mustEngine(t, db, "grpo", o)
		res, err := e.Rollout(context.Background(), 1, tasks(4))
		if err != nil {
			t.Fatal(err)
		}
		checkStep(t, db, "grpo", cfg, 1, 4, res, cov)
		for _, gr := range res.Groups {
			if len(gr.Leaves) != cfg.B0 || len(gr.Advantages) != cfg.B0 {
				t.Errorf("group %d: %d leaves, %d advantages, want G = %d", gr.Group.ID, len(gr.Leaves), len(gr.Advantages), cfg.B0)
			}
		}
	}
	if cov["status:truncated"] == 0 || cov["status:completed"] == 0 || cov["status:expanded"]+cov["status:pruned"] != 0 {
		t.Errorf("GRPO statuses %v: want completed and truncated leaves only", cov)
	}
}

// TestNewValidates: New refuses bad configs and missing parts with
// ErrInvalidConfig, and an unknown run with model.ErrNotFound.
func TestNewValidates(t *testing.T) {
	db := storetest.Open(t)
	newRun(t, db, "r", tree.DefaultConfig())
	good := hashOpts(tree.DefaultConfig(), tree.CommitInterval, false, nil)
	with := func(f func(*tree.Options)) tree.Options { o := good; f(&o); return o }
	bad := map[string]tree.Options{
		"M=0":            with(func(o *tree.Options) { o.Config.M = 0 }),
		"K=0":            with(func(o *tree.Options) { o.Config.K = 0 }),
		"B0=0":           with(func(o *tree.Options) { o.Config.B0 = 0 }),
		"Delta<0":        with(func(o *tree.Options) { o.Config.Delta = -0.1 }),
		"Delta=NaN":      with(func(o *tree.Options) { o.Config.Delta = math.NaN() }),
		"TopExpand<0":    with(func(o *tree.Options) { o.Config.TopExpand = -1 }),
		"MaxActive<B0":   with(func(o *tree.Options) { o.Config.MaxActive = 3 }),
		"PruneRule":      with(func(o *tree.Options) { o.Config.PruneRule = "mean" }),
		"zero Config":    with(func(o *tree.Options) { o.Config = tree.Config{} }),
		"no Scorer":      with(func(o *tree.Options) { o.Scorer = nil }),
		"no Policy":      with(func(o *tree.Options) { o.Policy = nil }),
		"no Env":         with(func(o *tree.Options) { o.Env = nil }),
		"GRPO no Policy": with(func(o *tree.Options) { o.Config.NoScoring = true; o.Scorer = nil; o.Policy = nil }),
		"Barrier":        with(func(o *tree.Options) { o.Barrier = tree.BarrierStep + 1 }),
		"Linger<0":       with(func(o *tree.Options) { o.Linger = -1 }),
		"Poll<0":         with(func(o *tree.Options) { o.Poll = -1 }),
	}
	for name, o := range bad {
		if e, err := tree.New(db, "r", o); !errors.Is(err, tree.ErrInvalidConfig) || e != nil {
			t.Errorf("%s: New = %v, %v; want ErrInvalidConfig", name, e, err)
		}
	}
	if _, err := tree.New(db, "r", good); err != nil {
		t.Errorf("good options: %v", err)
	}
	grpo := with(func(o *tree.Options) { o.Config.NoScoring = true; o.Scorer = nil })
	if _, err := tree.New(db, "r", grpo); !errors.Is(err, rollout.ErrConfigMismatch) || !strings.Contains(err.Error(), "no_scoring: false → true") {
		t.Errorf("a config that differs from the recorded one: %v, want ErrConfigMismatch naming no_scoring", err)
	}
	newRun(t, db, "g", grpo.Config)
	if _, err := tree.New(db, "g", grpo); err != nil {
		t.Errorf("NoScoring without a Scorer: %v", err)
	}
	if _, err := tree.New(db, "nope", good); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
}

// TestRolloutExisting: a step that already has groups for other tasks is
// refused with ErrStepExists and the file is left as it was; so is step 0.
func TestRolloutExisting(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	newRun(t, db, "r", cfg)
	e := mustEngine(t, db, "r", hashOpts(cfg, tree.CommitInterval, false, nil))
	if _, err := e.Rollout(context.Background(), 1, tasks(2)); err != nil {
		t.Fatal(err)
	}
	before := dumpRun(t, db, "r")
	if _, err := e.Rollout(context.Background(), 1, tasks(1)); !errors.Is(err, rollout.ErrStepExists) || !errors.Is(err, rollout.ErrConflict) {
		t.Errorf("second Rollout of step 1: %v, want ErrStepExists", err)
	}
	if _, err := e.Rollout(context.Background(), 0, tasks(1)); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("Rollout of step 0: %v, want ErrInvalid", err)
	}
	if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
		t.Errorf("refused Rollout changed the file: %s", d)
	}
	res, err := e.Rollout(context.Background(), 2, nil)
	if err != nil || len(res.Groups) != 0 || res.EnvSteps != 0 {
		t.Errorf("Rollout with no tasks = %+v, %v; want an empty result", res, err)
	}
}

// An engine given no Eps computes advantages with grpo.DefaultEps, the
// epsilon every other path of the library uses — not with 0.
func TestEngineDefaultEps(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 4, 2, 6
	newRun(t, db, "r", cfg)
	if _, err := mustEngine(t, db, "r", hashOpts(cfg, tree.CommitInterval, false, nil)).Rollout(context.Background(), 1, tasks(3)); err != nil {
		t.Fatal(err)
	}
	checked := 0
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		gs, err := r.Groups(1)
		if err != nil {
			return err
		}
		for _, g := range gs {
			advs, err := r.Advantages(1, g.ID)
			if err != nil {
				return err
			}
			rewards := make([]float64, len(advs))
			for i, a := range advs {
				rewards[i] = a.Outcome
			}
			want := grpo.Advantages(rewards, grpo.DefaultEps)
			if want.ZeroVariance {
				continue
			}
			for i, a := range advs {
				if math.Abs(a.Advantage-want.Adv[i]) > 1e-12*math.Max(1, math.Abs(want.Adv[i])) {
					t.Errorf("group %d leaf %d: advantage %v, want %v (eps %v)", g.ID, a.Leaf, a.Advantage, want.Adv[i], grpo.DefaultEps)
				}
			}
			checked++
		}
		return nil
	})
	if err != nil || checked == 0 {
		t.Fatalf("%d groups with varying rewards checked: %v", checked, err)
	}
}
