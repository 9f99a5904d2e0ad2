package server

import (
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

const testTree = `{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3,"repeat_prune":3}`

// grow drives one PaTR group over HTTP: three roots, two turns each, one
// routed interval (expand the best, keep the middle, prune the worst), then
// a turn on each survivor, the leaves finished. It returns the group id
// and the node ids: roots r[0..2], children c[0..1].
func grow(e *testEnv, run string, step uint64) (gid uint64, r, c []uint64) {
	e.t.Helper()
	var og OpenGroupResponse
	e.post("/api/v1/runs/"+run+"/groups", map[string]any{"client_key": fmt.Sprintf("open-%d", step), "step": step,
		"task": "t1", "prompt": "reach the goal", "gold": "goal"}, http.StatusCreated, &og)
	gid, r = og.Group.ID, og.Roots
	for i, id := range r {
		turns := []store.Turn{turn("right", 0), turn("down", 0)}
		if i == 2 {
			turns = []store.Turn{turn("left", 0.25), turn("left", 0)}
		}
		e.post(fmt.Sprintf("/api/v1/runs/%s/nodes/%d/turns", run, id),
			AppendTurnsRequest{Keyed: Keyed{fmt.Sprintf("t-%d-%d", step, id)}, From: ptr(0), Turns: turns}, http.StatusOK, nil)
	}
	var rr RouteResponse
	e.post(fmt.Sprintf("/api/v1/runs/%s/groups/%d/route", run, gid), RouteRequest{Keyed: Keyed{fmt.Sprintf("route-%d", step)}, Interval: ptr(0),
		Scores: []BranchScore{{Node: r[0], Score: ptr(0.9)}, {Node: r[1], Score: ptr(0.7)}, {Node: r[2], Score: ptr(0.2)}}}, http.StatusOK, &rr)
	c = rr.Decisions[0].Children
	for i, id := range []uint64{c[0], c[1], r[1]} {
		e.post(fmt.Sprintf("/api/v1/runs/%s/nodes/%d/turns", run, id), AppendTurnsRequest{Keyed: Keyed{fmt.Sprintf("t2-%d-%d", step, id)},
			From: ptr(map[bool]int{true: 2, false: 0}[id == r[1]]), Turns: []store.Turn{turn(fmt.Sprint("go", i), 0)}}, http.StatusOK, nil)
	}
	e.post(fmt.Sprintf("/api/v1/runs/%s/nodes/%d/finish", run, c[0]), FinishRequest{Keyed: Keyed{fmt.Sprintf("f-%d-a", step)}, Status: store.NodeCompleted, Reward: ptr(1.0)}, http.StatusOK, nil)
	e.post(fmt.Sprintf("/api/v1/runs/%s/nodes/%d/finish", run, c[1]), FinishRequest{Keyed: Keyed{fmt.Sprintf("f-%d-b", step)}, Status: store.NodeTruncated, Reward: ptr(0.0)}, http.StatusOK, nil)
	e.post(fmt.Sprintf("/api/v1/runs/%s/nodes/%d/finish", run, r[1]), FinishRequest{Keyed: Keyed{fmt.Sprintf("f-%d-c", step)}, Status: store.NodeCompleted, Reward: ptr(0.5)}, http.StatusOK, nil)
	return gid, r, c
}

func createRun(e *testEnv, id, treeJSON string) {
	e.t.Helper()
	e.post("/api/v1/runs", fmt.Sprintf(`{"client_key":"create-%s","id":%q,"tree":%s,"meta":{"who":"test"}}`, id, id, treeJSON), http.StatusCreated, nil)
}

func TestPaTRGroupOverHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)

	var og OpenGroupResponse
	e.post("/api/v1/runs/r1/groups", `{"client_key":"g1","step":1,"task":"t1","prompt":"p"}`, http.StatusCreated, &og)
	if len(og.Roots) != 3 || og.Group.Status != store.GroupOpen || og.Group.Step != 1 {
		t.Fatalf("open group: %+v", og)
	}
	r := og.Roots
	// Root 2 repeats its action three times: with repeat_prune 3 it is
	// pruned by the repeat rule whatever its score.
	actions := [][]string{{"a", "b"}, {"a", "c"}, {"x", "x", "x"}}
	for i, id := range r {
		var ts []store.Turn
		for _, a := range actions[i] {
			ts = append(ts, turn(a, 0.5))
		}
		var out AppendTurnsResponse
		e.post(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/turns", id), AppendTurnsRequest{Keyed: Keyed{fmt.Sprint("t", id)}, From: ptr(0), Turns: ts}, http.StatusOK, &out)
		if out.Turns != len(ts) || out.Node != id {
			t.Fatalf("append: %+v", out)
		}
	}
	scores := []float64{0.6, 0.8, 0.95}
	var rr RouteResponse
	e.post("/api/v1/runs/r1/groups/1/route", RouteRequest{Keyed: Keyed{"route0"}, Interval: ptr(0), Scores: []BranchScore{
		{Node: r[2], Score: &scores[2]}, {Node: r[0], Score: &scores[0]}, {Node: r[1], Score: &scores[1]}}}, http.StatusOK, &rr)

	// The decisions are tree.Route's on the same inputs under the stored config.
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.M, cfg.TopExpand, cfg.Delta, cfg.RepeatPrune = 3, 2, 2, 1, 0.3, 3
	want := tree.Route([]tree.Branch{{Node: r[0], Score: 0.6, RepeatRun: 1}, {Node: r[1], Score: 0.8, RepeatRun: 1}, {Node: r[2], Score: 0.95, RepeatRun: 3}}, cfg)
	if len(rr.Decisions) != 3 {
		t.Fatalf("decisions: %+v", rr.Decisions)
	}
	for i, d := range rr.Decisions {
		w := want[i]
		if d.Node != w.Node || d.Action != string(w.Action) || d.Rule != w.Rule || d.Reference != w.Reference || d.Rank != w.Rank || len(d.Children) != w.Children {
			t.Errorf("decision %d: got %+v, want %+v", i, d, w)
		}
	}
	// r2: pruned (repeat); r1: best survivor, expanded; r0: 0.6 < 0.95-0.3, pruned.
	if rr.Decisions[2].Action != "prune" || rr.Decisions[2].Rule != tree.RuleRepeat || rr.Decisions[1].Action != "expand" || rr.Decisions[0].Action != "prune" {
		t.Fatalf("unexpected routing: %+v", rr.Decisions)
	}
	if got := *rr.Decisions[0].Reward; got != 1.0 { // two turns of reward 0.5
		t.Errorf("pruned leaf reward %v, want the sum of its turn rewards 1", got)
	}
	kids := rr.Decisions[1].Children
	if fmt.Sprint(rr.Active) != fmt.Sprint(kids) || rr.Interval != 0 {
		t.Fatalf("active after route %v, children %v", rr.Active, kids)
	}
	var kid NodeInfo
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d", kids[1]), &kid)
	if kid.Node.Parent != r[1] || kid.Node.Fork != 2 || kid.Node.Base != 2 || kid.Node.Ordinal != 1 || kid.Node.Status != store.NodeActive {
		t.Fatalf("child: %+v", kid.Node)
	}
	var parent NodeInfo
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d", r[1]), &parent)
	if parent.Node.Status != store.NodeExpanded || len(parent.Node.Scores) != 1 || parent.Node.Scores[0].Turn != 2 || fmt.Sprint(parent.Children) != fmt.Sprint(kids) {
		t.Fatalf("parent: %+v children %v", parent.Node, parent.Children)
	}
	var g GroupTree
	e.get("/api/v1/runs/r1/groups/1", &g)
	if g.Group.Interval != 1 || len(g.Nodes) != 5 {
		t.Fatalf("group after route: interval %d, %d nodes", g.Group.Interval, len(g.Nodes))
	}

	// Grow the children, finish them, close.
	for i, id := range kids {
		e.post(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/turns", id), AppendTurnsRequest{Keyed: Keyed{fmt.Sprint("k", id)}, From: ptr(0),
			Turns: []store.Turn{turn(fmt.Sprint("k", i), float64(i))}}, http.StatusOK, nil)
	}
	var tr Trajectory
	e.get(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/trajectory", kids[0]), &tr)
	if tr.Inherited != 2 || len(tr.Turns) != 3 || tr.Turns[0].Node != r[1] || tr.Turns[1].Action != "c" || tr.Turns[2].Node != kids[0] || tr.Turns[2].Action != "k0" {
		t.Fatalf("trajectory: %+v", tr)
	}
	if len(tr.Segments) != 2 || tr.Segments[0] != (store.Segment{Node: r[1], Count: 2}) {
		t.Fatalf("segments: %+v", tr.Segments)
	}
	e.post(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/finish", kids[0]), `{"client_key":"fa","status":"completed","reward":1}`, http.StatusOK, nil)
	// Closing with an active branch left is a conflict and writes nothing.
	before := e.fileSum()
	st, _, body := e.call(http.MethodPost, "/api/v1/runs/r1/groups/1/close", `{"client_key":"c1"}`)
	if st != http.StatusConflict || e.fileSum() != before {
		t.Fatalf("close with an active node: %d %s", st, body)
	}
	e.post(fmt.Sprintf("/api/v1/runs/r1/nodes/%d/finish", kids[1]), `{"client_key":"fb","status":"truncated","reward":0}`, http.StatusOK, nil)
	var cg CloseGroupResponse
	e.post("/api/v1/runs/r1/groups/1/close", `{"client_key":"c1"}`, http.StatusOK, &cg)
	if cg.Group.Status != store.GroupClosed || len(cg.Advantages) != 4 {
		t.Fatalf("close: %+v", cg)
	}
	// Leaves in id order: r0 (pruned, 1), r2 (pruned, 1.5), kid0 (1), kid1 (0).
	rewards := []float64{1, 1.5, 1, 0}
	adv, mean, std, zv := tree.GRPOAdvantages(rewards, tree.DefaultEps)
	leaves := []uint64{r[0], r[2], kids[0], kids[1]}
	for i, a := range cg.Advantages {
		if a.Leaf != leaves[i] || a.Outcome != rewards[i] || math.Abs(a.Advantage-adv[i]) > 1e-12 || a.Mean != mean || a.Std != std || a.ZeroVariance != zv {
			t.Errorf("advantage %d: %+v, want leaf %d reward %v adv %v", i, a, leaves[i], rewards[i], adv[i])
		}
	}
	var stored struct{ Advantages []store.Advantage }
	e.get("/api/v1/runs/r1/advantages?step=1", &stored)
	if len(stored.Advantages) != 4 || fmt.Sprint(stored.Advantages[3]) != fmt.Sprint(cg.Advantages[3]) {
		t.Fatalf("stored advantages: %+v", stored.Advantages)
	}
}

func TestCloseWithRubricScores(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	gid, r, c := grow(e, "r1", 1)
	// Leaves: r0 (pruned? no: r0 expanded), ... find them from the tree.
	var g GroupTree
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
	var ls []LeafScore
	for i, id := range leaves {
		ls = append(ls, LeafScore{Leaf: id, Score: &scores[i]})
	}
	// Missing a leaf: refused, nothing written.
	before := e.dump()
	st, _, body := e.call(http.MethodPost, fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), CloseGroupRequest{Keyed: Keyed{"c"}, RubricScores: ls[:3]})
	if st != http.StatusBadRequest || e.dump() != before {
		t.Fatalf("close with a leaf unscored: %d %s", st, body)
	}
	var cg CloseGroupResponse
	e.post(fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), CloseGroupRequest{Keyed: Keyed{"c"}, RubricScores: ls, Lambda: ptr(0.2)}, http.StatusOK, &cg)
	var base []float64
	byID := map[uint64]store.Node{}
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
	adv, _, _, _ := tree.GRPOAdvantages(total, tree.DefaultEps)
	for i, a := range cg.Advantages {
		if a.Lambda != 0.2 || a.RubricScore != scores[i] || math.Abs(a.Total-total[i]) > 1e-12 || math.Abs(a.Advantage-adv[i]) > 1e-12 {
			t.Errorf("advantage %d: %+v, want total %v adv %v", i, a, total[i], adv[i])
		}
	}
}
