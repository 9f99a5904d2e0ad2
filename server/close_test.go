package server

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/tree"
)

// A driver of a dynamically sampled step closes with "filter": true: a
// group whose leaves all got the same reward is recorded as filtered (a
// group.filter event beside its close), as the in-process engine records
// it; a group with outcome variance, or a close without the flag, is not.
func TestCloseFilterRecordsGroupsWithoutGradient(t *testing.T) {
	e := newEnv(t, Options{})
	createRun(e, "flat", `{"b0":2,"k":1,"m":2,"top_expand":1,"max_turns":1}`)
	for _, c := range []struct {
		step   uint64
		filter bool
	}{{1, true}, {2, false}} {
		step, filter := c.step, c.filter
		g := openStep(e, "flat", step)
		ls := leaseAll(e, "flat", step)
		submitOK(e, "flat", fmt.Sprintf("flat-%d", step),
			sub(ls[g.Roots[0]], nil, done(turn("a", 1))), sub(ls[g.Roots[1]], nil, done(turn("b", 1))))
		var cg api.CloseGroupResponse
		e.post(fmt.Sprintf("/api/v1/runs/flat/groups/%d/close", g.ID),
			api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: fmt.Sprintf("close-%d", step)}, Filter: filter}, http.StatusOK, &cg)
		if len(cg.Advantages) != 2 || !cg.Advantages[0].ZeroVariance {
			t.Fatalf("step %d: advantages %+v", step, cg.Advantages)
		}
	}
	createRun(e, "vary", testTree)
	gid, _, _ := grow(e, "vary", 1)
	e.post(fmt.Sprintf("/api/v1/runs/vary/groups/%d/close", gid), api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: "close"}, Filter: true}, http.StatusOK, nil)

	filtered := func(run string) map[uint64]uint64 { // group -> step
		var page api.EventPage
		e.get("/api/v1/runs/"+run+"/events?from=1&limit=1000", &page)
		out := map[uint64]uint64{}
		for _, ev := range page.Events {
			if ev.Kind == tree.EvGroupFilter {
				out[ev.Group] = ev.Step
			}
		}
		return out
	}
	if got := filtered("flat"); len(got) != 1 || got[1] != 1 {
		t.Errorf("flat run: group.filter events %v, want group 1 of step 1 only", got)
	}
	if got := filtered("vary"); len(got) != 0 {
		t.Errorf("a group with outcome variance was filtered: %v", got)
	}
}
