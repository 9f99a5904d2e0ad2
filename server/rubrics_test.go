package server

import (
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// leavesGroup opens a group at step with len(rewards) roots, gives each one
// turn and finishes it with its reward.
func leavesGroup(e *testEnv, run string, step uint64, rewards []float64) (uint64, []uint64) {
	e.t.Helper()
	var os api.OpenStepResponse
	e.post("/api/v1/runs/"+run+"/steps", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: fmt.Sprint("open-", step)}, Step: step, Tasks: []rollout.Task{{ID: "qa"}}}, 200, &os)
	g := os.Groups[0]
	ls := leaseAll(e, run, step)
	var subs []rollout.Submission
	for i, id := range g.Roots {
		subs = append(subs, rollout.Submission{Lease: ls[id].ID, Worker: ls[id].Worker, Node: id, Reward: ptr(rewards[i]),
			Turns: []model.Turn{{Action: fmt.Sprint("answer ", i), Observation: "ok", Done: true}}})
	}
	submitOK(e, run, fmt.Sprint("leaves-", step), subs...)
	return g.ID, g.Roots
}

// shapeUntilComplete plays the client's side of the shape exchange and
// returns the answers and the rounds it took.
func shapeUntilComplete(e *testEnv, run string, gid uint64, prefer func(a, b uint64) string,
	drafts []model.Draft, consolidate func(api.ConsolidateNeed) []model.Consolidated) (api.ShapeAnswers, api.ShapeResponse, int) {
	e.t.Helper()
	var ans api.ShapeAnswers
	for round := 1; round <= 5; round++ {
		var sr api.ShapeResponse
		before := e.fileSum()
		e.post(fmt.Sprintf("/api/v1/runs/%s/groups/%d/shape", run, gid), api.ShapeRequest{ShapeAnswers: ans}, 200, &sr)
		if e.fileSum() != before {
			e.t.Fatal("shape wrote to the file")
		}
		if sr.Complete {
			return ans, sr, round
		}
		for _, n := range sr.Needs.Judge {
			ans.Judgements = append(ans.Judgements, api.JudgeAnswer{Rubric: n.Rubric, Draft: n.Draft, A: n.A, B: n.B, Result: prefer(n.A, n.B)})
		}
		if sr.Needs.Induce != nil {
			d := append([]model.Draft(nil), drafts...)
			ans.Drafts = &d
		}
		if sr.Needs.Consolidate != nil {
			c := consolidate(*sr.Needs.Consolidate)
			ans.Consolidation = &c
		}
	}
	e.t.Fatal("shaping did not complete in 5 rounds")
	return ans, api.ShapeResponse{}, 0
}

func TestRubricLifecycleOverHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	e.post("/api/v1/runs", `{"client_key":"c","id":"arbor","tree":{"b0":4},"rubric":{"consolidate_at":2,"active":1,"lambda":0.5}}`, 201, nil)

	// Step 1: no public rubric yet; the group's outcomes differ, so the pool
	// asks for drafts, then their judgements, then (two candidates reach
	// consolidate_at) a consolidation.
	var act api.ActiveRubrics
	e.post("/api/v1/runs/arbor/rubrics/activate", `{"client_key":"a1","step":1}`, 200, &act)
	if len(act.Active) != 0 {
		t.Fatalf("step 1 active: %+v", act)
	}
	gid, nodes := leavesGroup(e, "arbor", 1, []float64{0, 1, 0, 1})
	reward := map[uint64]float64{nodes[0]: 0, nodes[1]: 1, nodes[2]: 0, nodes[3]: 1}
	byReward := func(a, b uint64) string {
		switch {
		case reward[a] > reward[b]:
			return "a"
		case reward[a] < reward[b]:
			return "b"
		}
		return "tie"
	}
	drafts := []model.Draft{{Text: "the answer names the capital city"}, {Text: "the answer cites the second source document"}}
	var consolidated api.ConsolidateNeed
	ans, sr, rounds := shapeUntilComplete(e, "arbor", gid, byReward, drafts, func(n api.ConsolidateNeed) []model.Consolidated {
		consolidated = n
		var ids []uint64
		for _, d := range n.Drafts {
			ids = append(ids, d.ID)
		}
		return []model.Consolidated{{Text: "the answer is grounded in the retrieved documents", Absorbs: ids}}
	})
	if rounds != 4 || len(sr.Admitted) != 2 || !sr.Consolidated || len(sr.NewPublic) != 1 || len(sr.Merged) != 2 || len(consolidated.Drafts) != 2 {
		t.Fatalf("after %d rounds: %+v (consolidation asked with %+v)", rounds, sr, consolidated)
	}
	// An incomplete close is refused and writes nothing.
	before := e.dump()
	partial := ans
	partial.Consolidation = nil
	st, h, body := e.call(http.MethodPost, fmt.Sprintf("/api/v1/runs/arbor/groups/%d/close", gid), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "close1"}, Pool: &partial})
	if st != http.StatusConflict || e.dump() != before {
		t.Fatalf("incomplete close: %d %s", st, body)
	}
	assertErrorBody(t, h, body)
	// A consolidation that absorbs an unknown draft is the client's error.
	bad := ans
	bad.Consolidation = &[]model.Consolidated{{Text: "x", Absorbs: []uint64{99}}}
	st, _, body = e.call(http.MethodPost, fmt.Sprintf("/api/v1/runs/arbor/groups/%d/close", gid), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "close1"}, Pool: &bad})
	if st != http.StatusBadRequest || e.dump() != before {
		t.Fatalf("bad consolidation: %d %s", st, body)
	}
	var cg api.CloseGroupResponse
	e.post(fmt.Sprintf("/api/v1/runs/arbor/groups/%d/close", gid), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "close1"}, Pool: &ans}, 200, &cg)
	if cg.Group.Status != model.GroupClosed || len(cg.Advantages) != 4 || cg.Advantages[0].Lambda != 0 {
		t.Fatalf("close: %+v", cg)
	}
	var pools struct{ Rubrics []model.Rubric }
	e.get("/api/v1/runs/arbor/rubrics?pool=public", &pools)
	if len(pools.Rubrics) != 1 || len(pools.Rubrics[0].Parents) != 2 || pools.Rubrics[0].ID != sr.NewPublic[0] {
		t.Fatalf("public pool: %+v", pools.Rubrics)
	}
	e.get("/api/v1/runs/arbor/rubrics?pool=merged", &pools)
	if len(pools.Rubrics) != 2 {
		t.Fatalf("merged pool: %+v", pools.Rubrics)
	}

	// Step 2: the public rubric is active; a group whose rewards are all
	// equal is unlocked by its judgements.
	e.post("/api/v1/runs/arbor/rubrics/activate", `{"client_key":"a2","step":2}`, 200, &act)
	if len(act.Active) != 1 || act.Active[0].ID != sr.NewPublic[0] || act.Active[0].Usage.LastActivation != 2 {
		t.Fatalf("step 2 active: %+v", act)
	}
	var active api.ActiveRubrics
	e.get("/api/v1/runs/arbor/rubrics/active?step=2", &active)
	if len(active.Active) != 1 {
		t.Fatalf("GET active: %+v", active)
	}
	// Activating again (a retry, or under another key) changes nothing.
	before = e.dump()
	e.post("/api/v1/runs/arbor/rubrics/activate", `{"client_key":"a2","step":2}`, 200, nil)
	if e.dump() != before {
		t.Fatal("a repeated activation wrote")
	}
	gid2, nodes2 := leavesGroup(e, "arbor", 2, []float64{0, 0, 0, 0})
	low := func(a, b uint64) string {
		if a < b {
			return "a"
		}
		return "b"
	}
	ans2, sr2, _ := shapeUntilComplete(e, "arbor", gid2, low, nil, nil)
	if !sr2.ZeroVariance || sr2.ZeroVarianceAfter || !sr2.Unlocked || len(sr2.Rubrics) != 1 || sr2.Lambda != 0.5 {
		t.Fatalf("step 2 shape: %+v", sr2)
	}
	e.post(fmt.Sprintf("/api/v1/runs/arbor/groups/%d/close", gid2), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "close2"}, Pool: &ans2}, 200, &cg)
	for i, a := range cg.Advantages {
		if a.Leaf != nodes2[i] || !a.ZeroVariance || a.ZeroVarianceAfter || a.Lambda != 0.5 || a.RubricScore != *sr2.Scores[i].Score {
			t.Errorf("advantage %d: %+v", i, a)
		}
	}
	if cg.Advantages[0].Advantage <= 0 || cg.Advantages[3].Advantage >= 0 {
		t.Errorf("the lowest node id wins every pair, so it should lead: %+v", cg.Advantages)
	}
	var steps struct{ Steps []model.StepMetrics }
	e.get("/api/v1/runs/arbor/steps", &steps)
	if steps.Steps[1].Unlocked != 1 || steps.Steps[0].Pools[model.PoolMerged] != 2 || steps.Steps[0].Pools[model.PoolPublic] != 1 {
		t.Errorf("step metrics: %+v", steps.Steps)
	}

	// Bad answers: 400, nothing written.
	sum := e.fileSum()
	for _, body := range []string{
		`{"judgements":[{"rubric":1,"a":1,"b":2,"result":"maybe"}]}`,
		`{"judgements":[{"a":1,"b":2,"result":"a"}]}`,
		`{"judgements":[{"rubric":1,"a":1,"b":1,"result":"a"}]}`,
		`{"outcomes":[{"leaf":1}]}`,
		`{"drafts":[{"text":"x","weight":2}]}`,
	} {
		st, _, b := e.call(http.MethodPost, fmt.Sprintf("/api/v1/runs/arbor/groups/%d/shape", gid2), body)
		if st != http.StatusBadRequest && st != http.StatusConflict {
			t.Errorf("%s: %d %s", body, st, b)
		}
	}
	st, _, body = e.call(http.MethodPost, "/api/v1/runs/arbor/rubrics/activate", `{"client_key":"a0","step":1}`)
	if st != http.StatusBadRequest {
		t.Errorf("activating a past step: %d %s", st, body)
	}
	if e.fileSum() != sum {
		t.Fatal("a refused rubric request wrote")
	}
	st, _, _ = e.call(http.MethodGet, "/api/v1/runs/arbor/rubrics/active", nil)
	if st != http.StatusBadRequest {
		t.Errorf("GET active without a step: %d", st)
	}
}

// A step whose public rubrics were not activated cannot be shaped.
func TestShapeNeedsActivation(t *testing.T) {
	e := newEnv(t, Options{})
	e.post("/api/v1/runs", `{"client_key":"c","id":"r","tree":{"b0":3}}`, 201, nil)
	err := e.db.Update(func(tx *store.Tx) error {
		rt, _ := tx.Run("r")
		_, err := rt.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "public", CreatedStep: 0, Usage: model.RubricUsage{LastActivation: -1}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := leavesGroup(e, "r", 1, []float64{0, 1, 0})
	st, _, body := e.call(http.MethodPost, fmt.Sprintf("/api/v1/runs/r/groups/%d/shape", gid), `{}`)
	if st != http.StatusConflict {
		t.Fatalf("%d %s", st, body)
	}
}
