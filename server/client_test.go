package server

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// The Go client covers every endpoint and maps errors to sentinels.
func TestGoClient(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.c
	run, err := c.CreateRun(bg, CreateRunRequest{ID: "g", Tree: []byte(`{"b0":2,"k":1,"top_expand":1}`)})
	if err != nil || run.ID != "g" {
		t.Fatalf("create: %+v %v", run, err)
	}
	var cfg RunConfig
	if err := jsonUnmarshal(run.Record().Config, &cfg); err != nil || cfg.Tree.B0 != 2 {
		t.Fatalf("record config %s: %v", run.Record().Config, err)
	}
	og, err := c.OpenGroup(bg, "g", OpenGroupRequest{Step: 1, Task: "t"})
	if err != nil || len(og.Roots) != 2 {
		t.Fatalf("open: %+v %v", og, err)
	}
	a, b := og.Roots[0], og.Roots[1]
	for _, n := range og.Roots {
		if _, err := c.AppendTurns(bg, "g", n, AppendTurnsRequest{From: ptr(0), Turns: []store.Turn{turn("x", 0)}}); err != nil {
			t.Fatal(err)
		}
	}
	rr, err := c.Route(bg, "g", og.Group.ID, RouteRequest{Scores: []BranchScore{{Node: a, Score: ptr(0.9)}, {Node: b, Score: ptr(0.1)}}})
	if err != nil || len(rr.Active) != 2 || rr.Decisions[1].Action != "prune" {
		t.Fatalf("route: %+v %v", rr, err)
	}
	extra, err := c.AddNode(bg, "g", og.Group.ID, AddNodeRequest{Parent: a, Ordinal: 9, Fork: 1})
	if err != nil || !extra.Created {
		t.Fatalf("add node: %+v %v", extra, err)
	}
	for _, n := range append(rr.Active, extra.Node.ID) {
		if _, err := c.Finish(bg, "g", n, FinishRequest{Status: store.NodeCompleted, Reward: ptr(1.0)}); err != nil {
			t.Fatal(err)
		}
	}
	cg, err := c.CloseGroup(bg, "g", og.Group.ID, CloseGroupRequest{})
	if err != nil || len(cg.Advantages) != 4 {
		t.Fatalf("close: %+v %v", cg, err)
	}
	if _, err := c.PutCheckpoint(bg, "g", CheckpointRequest{Step: 1, URI: "file:///w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRunStatus(bg, "g", RunStatusRequest{Status: store.RunFinished}); err != nil {
		t.Fatal(err)
	}
	if act, err := c.Activate(bg, "g", ActivateRequest{Step: 2}); err != nil || len(act.Active) != 0 {
		t.Fatalf("activate: %+v %v", act, err)
	}
	if act, err := c.ActiveRubrics(bg, "g", 2); err != nil || act.Step != 2 {
		t.Fatalf("active: %+v %v", act, err)
	}

	h, err := c.Health(bg)
	check := func(what string, ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Errorf("%s: ok %v, err %v", what, ok, err)
		}
	}
	check("health", h.Status == "ok", err)
	runs, err := c.Runs(bg)
	check("runs", len(runs) == 1 && runs[0].Run.Status == store.RunFinished, err)
	sum, err := c.Run(bg, "g")
	check("run", sum.Leaves == 4 && sum.Run.LastStep == 1, err)
	steps, err := c.Steps(bg, "g")
	check("steps", len(steps) == 1 && steps[0].Leaves == 4, err)
	groups, err := c.Groups(bg, "g", 1)
	check("groups", len(groups) == 1, err)
	tr, err := c.Tree(bg, "g", og.Group.ID)
	check("tree", len(tr.Nodes) == 5, err)
	ni, err := c.Node(bg, "g", a)
	check("node", len(ni.Children) == 3, err)
	traj, err := c.Trajectory(bg, "g", extra.Node.ID)
	check("trajectory", traj.Inherited == 1 && len(traj.Turns) == 1, err)
	fr, err := c.Frontier(bg, "g", 0)
	check("frontier", len(fr) == 0, err)
	rbs, err := c.Rubrics(bg, "g", "")
	check("rubrics", len(rbs) == 0, err)
	advs, err := c.Advantages(bg, "g", 1, og.Group.ID)
	check("advantages", len(advs) == 4, err)
	page, err := c.Events(bg, "g", 1, 5)
	check("events", len(page.Events) == 5 && page.Next == 6, err)
	ck, err := c.Checkpoint(bg, "g", 0)
	check("checkpoint", ck.URI == "file:///w", err)
	st, err := c.Stats(bg, "g")
	check("stats", len(st.Runs) == 1, err)

	_, err = c.Node(bg, "g", 999)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing node: %v", err)
	}
	_, err = c.CloseGroup(bg, "g", og.Group.ID, CloseGroupRequest{})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("closing twice: %v", err)
	}
	_, err = c.CreateRun(bg, CreateRunRequest{ID: "g"})
	if !errors.Is(err, store.ErrExists) || !errors.Is(err, ErrConflict) {
		t.Errorf("duplicate run: %v", err)
	}
	_, err = c.Route(bg, "g", og.Group.ID, RouteRequest{Scores: []BranchScore{{Node: a, Score: ptr(2.0)}}})
	if !errors.Is(err, ErrBadRequest) {
		t.Errorf("score 2: %v", err)
	}
}
