package server

import (
	"encoding/json"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
)

func TestReadEndpoints(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	gid, r, c := grow(e, "r1", 1)
	e.post(fmt.Sprintf("/api/v1/runs/r1/groups/%d/close", gid), `{"client_key":"close"}`, 200, nil)
	e.post("/api/v1/runs/r1/checkpoints", `{"client_key":"ck","step":1,"inline":"AQID","meta":{"lr":"0.1"}}`, 201, nil)
	var og api.OpenStepResponse
	e.post("/api/v1/runs/r1/steps", `{"client_key":"o2","step":2,"tasks":[{"id":"t2"}]}`, 200, &og)
	// Rubrics are written in-process (the rubric endpoints have their own
	// test): one per pool.
	err := e.db.Update(func(tx *store.Tx) error {
		rt, _ := tx.Run("r1")
		pub, err := rt.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "checks the map", CreatedStep: 1, Usage: model.RubricUsage{LastActivation: -1}})
		if err != nil {
			return err
		}
		cand, err := rt.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "draft", CreatedStep: 2})
		if err != nil {
			return err
		}
		_, err = rt.MoveRubric(cand.ID, store.RubricMove{To: model.PoolMerged, MergedInto: pub.ID})
		if err != nil {
			return err
		}
		_, err = rt.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "another draft", CreatedStep: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	var h api.Health
	e.get("/api/v1/health", &h)
	if h.Status != "ok" || h.API != "v1" || h.File != FileID(e.db.Path()) || h.Path != "" {
		t.Errorf("health: %+v (the path is only for a request with the token)", h)
	}

	var runs struct{ Runs []api.RunSummary }
	e.get("/api/v1/runs", &runs)
	if len(runs.Runs) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	s := runs.Runs[0]
	if s.Run.ID != "r1" || s.Run.LastStep != 1 || s.Groups != 2 || s.OpenGroups != 1 || s.OpenStep != 2 || s.Nodes != 8 || s.Leaves != 4 || s.Frontier != 3 ||
		s.ByStatus[model.NodeExpanded] != 1 || s.Turns != 9 || s.Bytes != 0 || s.Buckets != nil || s.Events == 0 {
		t.Errorf("run summary: %+v", s)
	}
	// The bytes per bucket and the steps only when asked for: the bytes
	// walk every page of the run.
	var sized api.RunSummary
	e.get("/api/v1/runs/r1?buckets=true&steps=true", &sized)
	var sum int64
	for _, b := range sized.Buckets {
		sum += b.Bytes
	}
	if sized.Bytes <= 0 || sized.Bytes != sum || len(sized.Steps) != 2 || sized.Steps[0].Step != 1 || sized.Steps[1].OpenGroups != 1 {
		t.Errorf("?buckets=true&steps=true: bytes %d over %+v, steps %+v", sized.Bytes, sized.Buckets, sized.Steps)
	}
	var cfg runconfig.Config
	if err := json.Unmarshal(s.Run.Config, &cfg); err != nil || cfg.Tree.B0 != 3 || cfg.Tree.Delta != 0.3 || cfg.Rubric.Lambda != 0.1 {
		t.Errorf("stored config %s: %v", s.Run.Config, err)
	}
	var one api.RunSummary
	e.get("/api/v1/runs/r1", &one)
	if one.Run.ID != "r1" || one.Groups != 2 || one.Run.Meta["who"] != "test" {
		t.Errorf("run: %+v", one)
	}

	var steps struct{ Steps []model.StepMetrics }
	e.get("/api/v1/runs/r1/steps", &steps)
	if len(steps.Steps) != 2 {
		t.Fatalf("steps: %+v", steps)
	}
	s1 := steps.Steps[0]
	// Leaves of step 1: r1 0.5, r2 pruned (sum of turn rewards 0.25), c0 1, c1 0.
	if s1.Step != 1 || s1.Groups != 1 || s1.ClosedGroups != 1 || s1.Leaves != 4 || s1.Success != 0.75 || s1.MeanReward != (0.5+0.25+1+0)/4 || s1.ZeroVariance != 0 {
		t.Errorf("step 1: %+v", s1)
	}
	s2 := steps.Steps[1]
	if s2.Pools[model.PoolPublic] != 1 || s2.Pools[model.PoolMerged] != 1 || s2.Pools[model.PoolCandidate] != 1 || s1.Pools[model.PoolPublic] != 0 {
		t.Errorf("pools: step 1 %v, step 2 %v", s1.Pools, s2.Pools)
	}

	var groups struct {
		Step   uint64
		Groups []model.Group
	}
	e.get("/api/v1/runs/r1/steps/2/groups", &groups)
	if len(groups.Groups) != 1 || groups.Groups[0].Task != "t2" || len(groups.Groups[0].Roots) != 3 {
		t.Errorf("groups of step 2: %+v", groups)
	}

	var all struct{ Groups []model.Group }
	e.get("/api/v1/runs/r1/groups", &all)
	if len(all.Groups) != 2 || all.Groups[0].Step != 1 || all.Groups[1].Step != 2 {
		t.Errorf("all groups: %+v", all)
	}
	e.get("/api/v1/runs/r1/groups?step=2", &all)
	if len(all.Groups) != 1 || all.Groups[0].Task != "t2" {
		t.Errorf("groups?step=2: %+v", all)
	}
	viaClient, err := e.c.Groups(bg, "r1", 0)
	if err != nil || len(viaClient) != 2 {
		t.Errorf("client groups: %v %v", viaClient, err)
	}

	var tree api.GroupTree
	e.get(fmt.Sprintf("/api/v1/runs/r1/groups/%d", gid), &tree)
	if tree.Group.Status != model.GroupClosed || len(tree.Nodes) != 5 || tree.Nodes[0].ID != r[0] || tree.Nodes[4].ID != c[1] {
		t.Errorf("tree: %+v", tree)
	}

	var fr struct{ Nodes []model.Node }
	e.get("/api/v1/runs/r1/frontier", &fr)
	if len(fr.Nodes) != 3 || fr.Nodes[0].ID != og.Groups[0].Roots[0] {
		t.Errorf("frontier: %+v", fr)
	}
	e.get("/api/v1/runs/r1/frontier?step=1", &fr)
	if len(fr.Nodes) != 0 {
		t.Errorf("frontier of step 1: %+v", fr)
	}

	var rb struct{ Rubrics []model.Rubric }
	for pool, want := range map[string]int{"": 3, "all": 3, "public": 1, "candidate": 1, "merged": 1, "retired": 0} {
		e.get("/api/v1/runs/r1/rubrics?pool="+pool, &rb)
		if len(rb.Rubrics) != want {
			t.Errorf("pool %q: %d rubrics, want %d", pool, len(rb.Rubrics), want)
		}
	}

	var adv struct{ Advantages []model.Advantage }
	e.get("/api/v1/runs/r1/advantages", &adv)
	if len(adv.Advantages) != 4 {
		t.Errorf("advantages: %d", len(adv.Advantages))
	}
	e.get(fmt.Sprintf("/api/v1/runs/r1/advantages?step=1&group=%d", gid), &adv)
	if len(adv.Advantages) != 4 {
		t.Errorf("advantages of the group: %d", len(adv.Advantages))
	}
	e.get("/api/v1/runs/r1/advantages?step=2", &adv)
	if len(adv.Advantages) != 0 {
		t.Errorf("advantages of step 2: %d", len(adv.Advantages))
	}

	var ck struct{ Checkpoint model.Checkpoint }
	e.get("/api/v1/runs/r1/checkpoint", &ck)
	if ck.Checkpoint.Step != 1 || string(ck.Checkpoint.Inline) != "\x01\x02\x03" || ck.Checkpoint.Meta["lr"] != "0.1" {
		t.Errorf("checkpoint: %+v", ck)
	}

	var st api.Stats
	e.get("/api/v1/stats", &st)
	if len(st.Runs) != 1 || st.FileBytes <= 0 {
		t.Fatalf("stats: %+v", st)
	}
	rs := st.Runs[0]
	// Stored: 3 roots × 2 + r1's third turn + 1 per child = 9. Materialised
	// per leaf: r1 3, r2 2, c0 3, c1 3 = 11.
	if rs.TurnsStored != 9 || rs.TurnsMaterialised != 11 || rs.PrefixSharing != 11.0/9 || rs.Nodes != 8 || rs.Leaves != 4 {
		t.Errorf("run stats: %+v", rs)
	}
}

func TestEventPages(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "r1", testTree)
	grow(e, "r1", 1)
	last := e.lastSeq("r1")
	var all []api.EventJSON
	from := uint64(1)
	pages := 0
	for from != 0 {
		var p api.EventPage
		e.get(fmt.Sprintf("/api/v1/runs/r1/events?from=%d&limit=7", from), &p)
		if p.LastSeq != last || len(p.Events) > 7 {
			t.Fatalf("page: last %d, %d events", p.LastSeq, len(p.Events))
		}
		all = append(all, p.Events...)
		from = p.Next
		pages++
	}
	if uint64(len(all)) != last || pages != int((last+6)/7) {
		t.Fatalf("%d events in %d pages, last seq %d", len(all), pages, last)
	}
	kinds := map[model.EventKind]int{}
	for i, ev := range all {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		kinds[ev.Kind]++
	}
	if kinds[model.EvRunCreate] != 1 || kinds[model.EvGroupOpen] != 1 || kinds[model.EvNodeAdd] != 5 || kinds[model.EvNodeRoute] != 3 || kinds[model.EvReply] == 0 {
		t.Errorf("kinds: %v", kinds)
	}
	// Payloads come decoded: the run's config as JSON, a node as a record.
	first, _ := json.Marshal(all[0].Payload)
	var run struct {
		ID     string
		Config runconfig.Config
	}
	if err := json.Unmarshal(first, &run); err != nil || run.ID != "r1" || run.Config.Tree.B0 != 3 {
		t.Errorf("run.create payload %s: %v", first, err)
	}
	// Past the end: an empty page.
	var p api.EventPage
	e.get(fmt.Sprintf("/api/v1/runs/r1/events?from=%d", last+1), &p)
	if len(p.Events) != 0 || p.Next != 0 {
		t.Errorf("past the end: %+v", p)
	}
	// The viewer page and its assets are served.
	st, _, body := e.call(http.MethodGet, "/", nil)
	if st != 200 || len(body) == 0 {
		t.Errorf("viewer: %d", st)
	}
}
