package server

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/runconfig"
)

// The Go client covers every endpoint and maps errors to sentinels.
func TestGoClient(t *testing.T) {
	e := newEnv(t, Options{})
	c := e.c
	run, err := c.CreateRun(bg, api.CreateRunRequest{ID: "g", Tree: []byte(`{"b0":2,"k":1,"top_expand":1,"max_turns":2}`)})
	if err != nil || run.ID != "g" {
		t.Fatalf("create: %+v %v", run, err)
	}
	var cfg runconfig.Config
	if err := jsonUnmarshal(run.Record().Config, &cfg); err != nil || cfg.Tree.B0 != 2 {
		t.Fatalf("record config %s: %v", run.Record().Config, err)
	}
	os, err := c.OpenStep(bg, "g", api.OpenStepRequest{Step: 1, Tasks: []rollout.Task{{ID: "t"}}})
	if err != nil || len(os.Groups) != 1 || len(os.Groups[0].Roots) != 2 {
		t.Fatalf("open: %+v %v", os, err)
	}
	og := os.Groups[0]
	a, b := og.Roots[0], og.Roots[1]
	ls, err := c.Lease(bg, "g", api.LeaseRequest{Worker: "w", Step: 1})
	if err != nil || len(ls) != 2 || ls[0].Node != a {
		t.Fatalf("lease: %+v %v", ls, err)
	}
	rr, err := c.Submit(bg, "g", api.SubmitRequest{Submissions: []rollout.Submission{
		{Lease: ls[0].ID, Worker: ls[0].Worker, Node: a, Turns: []model.Turn{turn("x", 0)}, Score: ptr(0.9)},
		{Lease: ls[1].ID, Worker: ls[1].Worker, Node: b, Turns: []model.Turn{turn("x", 0)}, Score: ptr(0.1)}}})
	if err != nil || len(rr.Routed) != 1 || len(rr.Routed[0].Active) != 2 || rr.Routed[0].Decisions[1].Action != model.ActionPrune {
		t.Fatalf("submit: %+v %v", rr, err)
	}
	kids := rr.Routed[0].Active
	_, err = c.Submit(bg, "g", api.SubmitRequest{Submissions: []rollout.Submission{{Lease: ls[0].ID, Worker: ls[0].Worker, Node: kids[0], Turns: []model.Turn{turn("y", 1)}}}})
	if !errors.Is(err, rollout.ErrLeaseLost) || !errors.Is(err, rollout.ErrConflict) || !errors.Is(err, api.ErrConflict) {
		t.Errorf("submit under another branch's lease: %v", err)
	}
	ls, err = c.Lease(bg, "g", api.LeaseRequest{Worker: "w", Step: 1})
	if err != nil || len(ls) != 2 || ls[0].Turns != 1 || ls[0].Score || len(ls[0].History) != 1 {
		t.Fatalf("lease the children: %+v %v", ls, err)
	}
	if st, err := c.StepStatus(bg, "g", 1); err != nil || st.Active != 2 || st.Leased != 2 {
		t.Fatalf("status: %+v %v", st, err)
	}
	for _, l := range ls {
		if _, err := c.Submit(bg, "g", api.SubmitRequest{Submissions: []rollout.Submission{{Lease: l.ID, Worker: l.Worker, Node: l.Node, Turns: []model.Turn{turn("y", 1)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	cg, err := c.CloseGroup(bg, "g", og.ID, api.CloseGroupRequest{})
	if err != nil || len(cg.Advantages) != 3 {
		t.Fatalf("close: %+v %v", cg, err)
	}
	if _, err := c.PutCheckpoint(bg, "g", api.CheckpointRequest{Step: 1, URI: "file:///w"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetRunStatus(bg, "g", api.RunStatusRequest{Status: model.RunFinished}); err != nil {
		t.Fatal(err)
	}
	if act, err := c.Activate(bg, "g", api.ActivateRequest{Step: 2}); err != nil || len(act.Active) != 0 {
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
	check("runs", len(runs) == 1 && runs[0].Run.Status == model.RunFinished, err)
	sum, err := c.Run(bg, "g")
	check("run", sum.Leaves == 3 && sum.Run.LastStep == 1, err)
	steps, err := c.Steps(bg, "g")
	check("steps", len(steps) == 1 && steps[0].Leaves == 3, err)
	groups, err := c.Groups(bg, "g", 1)
	check("groups", len(groups) == 1, err)
	tr, err := c.Tree(bg, "g", og.ID)
	check("tree", len(tr.Nodes) == 4, err)
	ni, err := c.Node(bg, "g", a)
	check("node", len(ni.Children) == 2, err)
	traj, err := c.Trajectory(bg, "g", kids[1])
	check("trajectory", traj.Inherited == 1 && len(traj.Turns) == 2, err)
	fr, err := c.Frontier(bg, "g", 0)
	check("frontier", len(fr) == 0, err)
	rbs, err := c.Rubrics(bg, "g", "")
	check("rubrics", len(rbs) == 0, err)
	advs, err := c.Advantages(bg, "g", 1, og.ID)
	check("advantages", len(advs) == 3, err)
	page, err := c.Events(bg, "g", 1, 5)
	check("events", len(page.Events) == 5 && page.Next == 6, err)
	ck, err := c.Checkpoint(bg, "g", 0)
	check("checkpoint", ck.URI == "file:///w", err)
	st, err := c.Stats(bg, "g")
	check("stats", len(st.Runs) == 1, err)

	_, err = c.Node(bg, "g", 999)
	if !errors.Is(err, model.ErrNotFound) {
		t.Errorf("missing node: %v", err)
	}
	_, err = c.CloseGroup(bg, "g", og.ID, api.CloseGroupRequest{})
	if !errors.Is(err, api.ErrConflict) {
		t.Errorf("closing twice: %v", err)
	}
	_, err = c.CreateRun(bg, api.CreateRunRequest{ID: "g"})
	if !errors.Is(err, model.ErrExists) || !errors.Is(err, api.ErrConflict) {
		t.Errorf("duplicate run: %v", err)
	}
	_, err = c.OpenStep(bg, "g", api.OpenStepRequest{Step: 1, Tasks: []rollout.Task{{ID: "other"}}})
	if !errors.Is(err, rollout.ErrConflict) {
		t.Errorf("re-opening a completed step: %v", err)
	}
	if _, err := c.OpenStep(bg, "g", api.OpenStepRequest{Step: 2, Tasks: []rollout.Task{{ID: "t"}}}); err != nil {
		t.Fatal(err)
	}
	ab, err := c.AbandonStep(bg, "g", 2, api.AbandonRequest{Reason: "test"})
	if err != nil || len(ab.Groups) != 1 || ab.Groups[0].Status != model.GroupClosed {
		t.Errorf("abandon: %+v %v", ab, err)
	}
	_, err = c.AbandonStep(bg, "g", 2, api.AbandonRequest{})
	if !errors.Is(err, api.ErrBadRequest) {
		t.Errorf("abandon without a reason: %v", err)
	}
}
