package server

import (
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/tree"
)

// testTree: three roots, intervals of two turns, the best branch expanded
// into two, a turn cap of three (so the second interval is one turn).
const testTree = `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3,"repeat_prune":2,"max_turns":3}`

// openStep opens step with one task and returns its group.
func openStep(e *testEnv, run string, step uint64) model.Group {
	e.t.Helper()
	var os api.OpenStepResponse
	e.post("/api/v1/runs/"+run+"/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: fmt.Sprintf("open-%d", step)}, Step: step,
		Tasks: []rollout.Task{{ID: "t1", Prompt: "reach the goal", Gold: "goal"}}}, http.StatusOK, &os)
	if len(os.Groups) != 1 {
		e.t.Fatalf("open step %d: %+v", step, os)
	}
	return os.Groups[0]
}

// leaseAll leases every free branch of step, by node.
func leaseAll(e *testEnv, run string, step uint64) map[uint64]api.LeaseGrant {
	e.t.Helper()
	var lr api.LeaseResponse
	e.post("/api/v1/runs/"+run+"/leases", api.LeaseRequest{Worker: "test", Step: step}, http.StatusOK, &lr)
	out := map[uint64]api.LeaseGrant{}
	for _, l := range lr.Leases {
		out[l.Node] = l
	}
	return out
}

// sub is a submission under l's lease.
func sub(l api.LeaseGrant, score *float64, turns ...model.Turn) rollout.Submission {
	return rollout.Submission{Lease: l.ID, Worker: l.Worker, Node: l.Node, From: l.From, Turns: turns, Score: score}
}

func submitOK(e *testEnv, run, key string, subs ...rollout.Submission) rollout.Submitted {
	e.t.Helper()
	var out rollout.Submitted
	e.post("/api/v1/runs/"+run+"/submit", api.SubmitRequest{Keyed: api.Keyed{ClientKey: key}, Submissions: subs}, http.StatusOK, &out)
	return out
}

func done(t model.Turn) model.Turn { t.Done = true; return t }

// grow drives one PaTR group over HTTP: three roots, two turns each, one
// routed interval (expand the best, keep the middle, prune the worst), then
// the last turn of each live branch. It returns the group id and the node
// ids: roots r[0..2], children c[0..1]; r[1] and c[0] complete, c[1] is
// truncated by the turn cap, r[2] pruned.
func grow(e *testEnv, run string, step uint64) (gid uint64, r, c []uint64) {
	e.t.Helper()
	g := openStep(e, run, step)
	gid, r = g.ID, g.Roots
	ls := leaseAll(e, run, step)
	if len(ls) != 3 {
		e.t.Fatalf("leases of step %d: %+v", step, ls)
	}
	out := submitOK(e, run, fmt.Sprintf("i0-%d", step),
		sub(ls[r[0]], ptr(0.9), turn("right", 0), turn("down", 0)),
		sub(ls[r[1]], ptr(0.7), turn("right", 0), turn("down", 0)),
		sub(ls[r[2]], ptr(0.2), turn("left", 0.25), turn("up", 0)))
	if len(out.Routed) != 1 || len(out.Routed[0].Decisions) != 3 {
		e.t.Fatalf("interval 0: %+v", out)
	}
	c = out.Routed[0].Decisions[0].ChildIDs
	ls = leaseAll(e, run, step)
	out = submitOK(e, run, fmt.Sprintf("i1-%d", step),
		sub(ls[c[0]], nil, done(turn("go0", 1))),
		sub(ls[c[1]], nil, turn("go1", 0)),
		sub(ls[r[1]], nil, done(turn("go2", 0.5))))
	if fmt.Sprint(out.Done) != fmt.Sprint([]uint64{gid}) {
		e.t.Fatalf("interval 1: %+v", out)
	}
	return gid, r, c
}

func createRun(e *testEnv, id, treeJSON string) {
	e.t.Helper()
	e.post("/api/v1/runs", fmt.Sprintf(`{"client_key":"create-%s","id":%q,"tree":%s,"meta":{"who":"test"}}`, id, id, treeJSON), http.StatusCreated, nil)
}

func TestPaTRGroupOverHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	g := openStep(e, "r1", 1)
	if len(g.Roots) != 3 || g.Status != model.GroupOpen || g.Step != 1 {
		t.Fatalf("open step: %+v", g)
	}
	r := g.Roots
	ls := leaseAll(e, "r1", 1)
	for _, id := range r {
		if l := ls[id]; l.Turns != 2 || !l.Score || l.From != 0 || len(l.History) != 0 {
			t.Fatalf("lease of root %d: %+v", id, l)
		}
	}
	// Root 2 repeats its action: with repeat_prune 2 it is pruned by the
	// repeat rule whatever its score.
	actions := [][]string{{"a", "b"}, {"a", "c"}, {"x", "x"}}
	scores := []float64{0.6, 0.8, 0.95}
	var subs []rollout.Submission
	for i, id := range r {
		var ts []model.Turn
		for _, a := range actions[i] {
			ts = append(ts, turn(a, 0.5))
		}
		subs = append(subs, sub(ls[id], &scores[i], ts...))
	}
	out := submitOK(e, "r1", "interval0", subs[2], subs[0], subs[1])

	// The decisions are tree.Route's on the same inputs under the stored config.
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta, cfg.RepeatPrune, cfg.MaxTurns = 3, 2, 2, 1, 0.3, 2, 3
	want := tree.Route([]tree.Branch{{Node: r[0], Score: 0.6, RepeatRun: 1}, {Node: r[1], Score: 0.8, RepeatRun: 1}, {Node: r[2], Score: 0.95, RepeatRun: 2}}, cfg)
	if len(out.Routed) != 1 || len(out.Routed[0].Decisions) != 3 {
		t.Fatalf("routed: %+v", out.Routed)
	}
	rt := out.Routed[0]
	for i, d := range rt.Decisions {
		w := want[i]
		if d.Node != w.Node || d.Action != w.Action || d.Rule != w.Rule || d.Reference != w.Reference || d.Rank != w.Rank || len(d.ChildIDs) != w.Children {
			t.Errorf("decision %d: got %+v, want %+v", i, d, w)
		}
	}
	// r2: pruned (repeat); r1: best survivor, expanded; r0: 0.6 < 0.95-0.3, pruned.
	if rt.Decisions[2].Action != model.ActionPrune || rt.Decisions[2].Rule != tree.RuleRepeat || rt.Decisions[1].Action != model.ActionExpand || rt.Decisions[0].Action != model.ActionPrune {
		t.Fatalf("unexpected routing: %+v", rt.Decisions)
	}
	var pruned api.NodeInfo
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d", r[0]), &pruned)
	if !pruned.Node.HasReward || pruned.Node.Reward != 1.0 { // two turns of reward 0.5
		t.Errorf("pruned leaf %+v, want the sum of its turn rewards 1", pruned.Node)
	}
	kids := rt.Decisions[1].ChildIDs
	if fmt.Sprint(rt.Active) != fmt.Sprint(kids) || rt.Interval != 0 {
		t.Fatalf("active after route %v, children %v", rt.Active, kids)
	}
	var kid api.NodeInfo
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d", kids[1]), &kid)
	if kid.Node.Parent != r[1] || kid.Node.Fork != 2 || kid.Node.Base != 2 || kid.Node.Ordinal != 1 || kid.Node.Status != model.NodeActive {
		t.Fatalf("child: %+v", kid.Node)
	}
	var parent api.NodeInfo
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d", r[1]), &parent)
	if parent.Node.Status != model.NodeExpanded || len(parent.Node.Scores) != 1 || parent.Node.Scores[0].Turn != 2 || fmt.Sprint(parent.Children) != fmt.Sprint(kids) {
		t.Fatalf("parent: %+v children %v", parent.Node, parent.Children)
	}
	var gt api.GroupTree
	e.get("/api/v1/runs/r1/groups/1", &gt)
	if gt.Group.Interval != 1 || len(gt.Nodes) != 5 {
		t.Fatalf("group after route: interval %d, %d nodes", gt.Group.Interval, len(gt.Nodes))
	}

	// The children's leases carry the inherited history; the turn cap
	// leaves them one turn, after which they are leaves (no score due).
	ls = leaseAll(e, "r1", 1)
	for _, id := range kids {
		l := ls[id]
		if l.Turns != 1 || l.Score || l.PathLen != 2 || len(l.History) != 2 || l.History[1].Action != "c" {
			t.Fatalf("lease of child %d: %+v", id, l)
		}
	}
	submitOK(e, "r1", "kid0", sub(ls[kids[0]], nil, done(turn("k0", 0))))
	var tr api.Trajectory
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/trajectory", kids[0]), &tr)
	if tr.Inherited != 2 || len(tr.Turns) != 3 || tr.Turns[0].Node != r[1] || tr.Turns[1].Action != "c" || tr.Turns[2].Node != kids[0] || tr.Turns[2].Action != "k0" {
		t.Fatalf("trajectory: %+v", tr)
	}
	if len(tr.Segments) != 2 || tr.Segments[0] != (model.Segment{Node: r[1], Count: 2}) {
		t.Fatalf("segments: %+v", tr.Segments)
	}
	// Closing with an active branch left is a conflict and writes nothing.
	before := e.fileSum()
	st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/groups/1/close", `{"client_key":"c1"}`)
	if st != http.StatusConflict || e.fileSum() != before {
		t.Fatalf("close with an active node: %d %s", st, body)
	}
	var status rollout.StepStatus
	e.get("/api/v1/runs/r1/steps/1/status", &status)
	if status.Open != 1 || status.Active != 1 || status.Leased != 1 || len(status.Done) != 0 {
		t.Fatalf("status with one branch left: %+v", status)
	}
	out = submitOK(e, "r1", "kid1", sub(ls[kids[1]], nil, turn("k1", 0.25)))
	if out.Results[0].Status != model.NodeTruncated || fmt.Sprint(out.Done) != "[1]" {
		t.Fatalf("last branch: %+v", out)
	}
	e.get("/api/v1/runs/r1/steps/1/status", &status)
	if status.Open != 1 || status.Active != 0 || status.Leased != 0 || fmt.Sprint(status.Done) != "[1]" {
		t.Fatalf("status with the group done: %+v", status)
	}
	var cg api.CloseGroupResponse
	e.post("/api/v1/runs/r1/groups/1/close", `{"client_key":"c1"}`, http.StatusOK, &cg)
	if cg.Group.Status != model.GroupClosed || len(cg.Advantages) != 4 {
		t.Fatalf("close: %+v", cg)
	}
	// Leaves in id order: r0 (pruned, 1), r2 (pruned, 1), kid0 (1: path
	// a, c, k0), kid1 (truncated, 1.25).
	rewards := []float64{1, 1, 1, 1.25}
	ref := grpo.Advantages(rewards, grpo.DefaultEps)
	adv, mean, std, zv := ref.Adv, ref.Mean, ref.Std, ref.ZeroVariance
	leaves := []uint64{r[0], r[2], kids[0], kids[1]}
	for i, a := range cg.Advantages {
		if a.Leaf != leaves[i] || a.Outcome != rewards[i] || math.Abs(a.Advantage-adv[i]) > 1e-12 || a.Mean != mean || a.Std != std || a.ZeroVariance != zv {
			t.Errorf("advantage %d: %+v, want leaf %d reward %v adv %v", i, a, leaves[i], rewards[i], adv[i])
		}
	}
	var stored struct{ Advantages []model.Advantage }
	e.get("/api/v1/runs/r1/advantages?step=1", &stored)
	if len(stored.Advantages) != 4 || fmt.Sprint(stored.Advantages[3]) != fmt.Sprint(cg.Advantages[3]) {
		t.Fatalf("stored advantages: %+v", stored.Advantages)
	}
	e.get("/api/v1/runs/r1/steps/1/status", &status)
	if status.Open != 0 || status.Closed != 1 {
		t.Fatalf("status after close: %+v", status)
	}
}

func TestCloseWithRubricScores(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	gid, r, c := grow(e, "r1", 1)
	// Leaves: r0 (pruned? no: r0 expanded), ... find them from the tree.
	var g api.GroupTree
	e.get(fmt.Sprintf("/api/v1/runs/r1/groups/%d", gid), &g)
	var leaves []uint64
	for _, n := range g.Nodes {
		if n.Status.Leaf() {
			leaves = append(leaves, n.ID)
		}
	}
	if len(leaves) != 4 { // r1 completed, r2 pruned, c0, c1
		t.Fatalf("leaves %v (roots %v children %v)", leaves, r, c)
	}
	scores := []float64{0.5, -0.5, 0.25, -0.25}
	var ls []api.LeafScore
	for i, id := range leaves {
		ls = append(ls, api.LeafScore{Leaf: id, Score: &scores[i]})
	}
	// Missing a leaf: refused, nothing written.
	before := e.dump()
	st, _, body := e.call(http.MethodPost, fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "c"}, RubricScores: ls[:3]})
	if st != http.StatusBadRequest || e.dump() != before {
		t.Fatalf("close with a leaf unscored: %d %s", st, body)
	}
	var cg api.CloseGroupResponse
	e.post(fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "c"}, RubricScores: ls, Lambda: ptr(0.2)}, http.StatusOK, &cg)
	var base []float64
	byID := map[uint64]model.Node{}
	for _, n := range g.Nodes {
		byID[n.ID] = n
	}
	for _, id := range leaves {
		base = append(base, byID[id].Reward)
	}
	total := make([]float64, len(base))
	for i := range base {
		total[i] = base[i] + 0.2*scores[i]
	}
	adv := grpo.Advantages(total, grpo.DefaultEps).Adv
	for i, a := range cg.Advantages {
		if a.Lambda != 0.2 || a.RubricScore != scores[i] || math.Abs(a.Total-total[i]) > 1e-12 || math.Abs(a.Advantage-adv[i]) > 1e-12 {
			t.Errorf("advantage %d: %+v, want total %v adv %v", i, a, total[i], adv[i])
		}
	}
}
