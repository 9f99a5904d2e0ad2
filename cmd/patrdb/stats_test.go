package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/server"
)

// statsGoldens are the golden cases of stats; remote_test.go runs them
// through a server too.
var statsGoldens = []goldenCase{
	{name: "stats", args: []string{"stats"}},
	{name: "stats_run", args: []string{"stats", "patr-4x4"}},
	{name: "stats_json", args: []string{"stats", "patr-4x4", "--json"}},
}

func TestStatsGolden(t *testing.T) { checkGoldens(t, statsGoldens) }

// TestStatsAgreeWithOtherCommands: the figures match what runs and show
// report from the same file, and the fixture's known tree.
func TestStatsAgreeWithOtherCommands(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	var st statsOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "stats", "--json").ok(t).stdout), &st); err != nil {
		t.Fatal(err)
	}
	var runs runsOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "runs", "--json", "--bytes").ok(t).stdout), &runs); err != nil {
		t.Fatal(err)
	}
	if len(st.Runs) != len(runs.Runs) {
		t.Fatalf("%d runs in stats, %d in runs", len(st.Runs), len(runs.Runs))
	}
	for i, r := range runs.Runs {
		s := st.Runs[i]
		if s.Run != r.Run || s.Total.Groups != r.Groups || s.Total.Nodes != r.Nodes || s.Total.TurnsStored != r.Turns || s.Total.Leaves != r.Leaves || s.Bytes != r.Bytes {
			t.Errorf("run %s: stats %+v\nruns %+v", r.Run, s.Total, r)
		}
	}
	// patr-4x4, step 1 group 1: leaves 2 (path 4), 3 (2), 4 (6), 5 (3);
	// group 2: 6 (5), 7 (3). Materialised 23 turns.
	var p *replay.RunStats
	for _, r := range st.Runs {
		if r.Run == "patr-4x4" {
			p = &r.RunStats
		}
	}
	if p == nil || len(p.Steps) != 2 || p.Steps[0].TurnsMaterialised != 23 || p.Steps[0].Leaves != 6 || p.Steps[0].ZeroVarBefore != 1 || p.Steps[0].UnlockedGroups != 1 {
		t.Errorf("patr-4x4 step 1: %+v", p.Steps[0])
	}
	cli(t, "--db", path, "stats", "nope").fails(t, 1, `run "nope" not found`)
	cli(t, "--db", path, "stats", "a", "b").fails(t, 2, "at most RUN")
	if fileHash(t, path) != before {
		t.Error("stats changed the file")
	}
}

// One definition of leaves and mean_reward (docs/json.md): on a run with a
// closed group, and a later step whose group is still open with some of
// its leaves rewarded and one branch still active, GET /runs, GET
// /runs/{run}/steps, `patrdb show` and `patrdb stats --server` print the
// same figures, per step and for the run — the open group's leaves
// counted by all of them.
func TestLeavesAndMeanRewardAreOneFigure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	o, _ := serveInProcess(t, path, server.Options{}, false)
	ctx := context.Background()
	c := client.New(o.url)
	if _, err := c.CreateRun(ctx, api.CreateRunRequest{ID: "r", Tree: json.RawMessage(`{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3}`)}); err != nil {
		t.Fatal(err)
	}
	end := func(step uint64, rewards []float64) {
		t.Helper()
		ls, err := c.Lease(ctx, "r", api.LeaseRequest{Worker: "w", Step: step})
		if err != nil || len(ls) != 3 {
			t.Fatalf("lease step %d: %d leases, %v", step, len(ls), err)
		}
		var subs []rollout.Submission
		for i, r := range rewards {
			subs = append(subs, rollout.Submission{Lease: ls[i].ID, Worker: "w", Node: ls[i].Node, Reward: &r,
				Turns: []model.Turn{{Action: "a", Observation: "o", Done: true}}})
		}
		if _, err := c.Submit(ctx, "r", api.SubmitRequest{Submissions: subs}); err != nil {
			t.Fatal(err)
		}
	}
	og, err := c.OpenStep(ctx, "r", api.OpenStepRequest{Step: 1, Tasks: []rollout.Task{{ID: "t1"}}})
	if err != nil {
		t.Fatal(err)
	}
	end(1, []float64{1, 0, 0.5})
	if _, err := c.CloseGroup(ctx, "r", og.Groups[0].ID, api.CloseGroupRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenStep(ctx, "r", api.OpenStepRequest{Step: 2, Tasks: []rollout.Task{{ID: "t2"}}}); err != nil {
		t.Fatal(err)
	}
	end(2, []float64{1, 0.25}) // the third branch stays active: the group stays open

	type figure struct {
		leaves int
		mean   *float64
	}
	same := func(what string, got, want figure) {
		t.Helper()
		if got.leaves != want.leaves || (got.mean == nil) != (want.mean == nil) || (got.mean != nil && *got.mean != *want.mean) {
			t.Errorf("%s: leaves %d, mean reward %v; GET /runs says leaves %d, mean reward %v", what, got.leaves, deref(got.mean), want.leaves, deref(want.mean))
		}
	}
	mean := func(x float64) *float64 { return &x }
	runs, err := c.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("GET /runs: %v %v", runs, err)
	}
	total := figure{runs[0].Leaves, runs[0].MeanReward}
	same("the definition", total, figure{5, mean(2.75 / 5)})
	withSteps, err := c.RunWith(ctx, "r", model.SummaryOptions{Steps: true})
	if err != nil || len(withSteps.Steps) != 2 {
		t.Fatalf("GET /runs/r with steps: %+v %v", withSteps, err)
	}
	steps := map[uint64]figure{}
	for _, s := range withSteps.Steps {
		steps[s.Step] = figure{s.Leaves, s.MeanReward}
	}
	same("step 2 (open)", steps[2], figure{2, mean(1.25 / 2)})

	metrics, err := c.Steps(ctx, "r")
	if err != nil || len(metrics) != 2 {
		t.Fatalf("GET /runs/r/steps: %v %v", metrics, err)
	}
	for _, m := range metrics {
		same(fmt.Sprintf("GET /runs/r/steps step %d", m.Step), figure{m.Leaves, &m.MeanReward}, steps[m.Step])
	}
	var show showOutput
	if err := json.Unmarshal([]byte(cli(t, "--server", o.url, "show", "r", "--json").ok(t).stdout), &show); err != nil {
		t.Fatal(err)
	}
	same("show", figure{show.Leaves, show.MeanReward}, total)
	for _, s := range show.Steps {
		same(fmt.Sprintf("show step %d", s.Step), figure{s.Leaves, s.MeanReward}, steps[s.Step])
	}
	var st statsOutput
	if err := json.Unmarshal([]byte(cli(t, "--server", o.url, "stats", "r", "--json").ok(t).stdout), &st); err != nil {
		t.Fatal(err)
	}
	rs := st.Runs[0]
	same("stats --server", figure{rs.Total.Leaves, rs.Total.MeanReward}, total)
	for _, s := range rs.Steps {
		same(fmt.Sprintf("stats --server step %d", s.Step), figure{s.Leaves, s.MeanReward}, steps[s.Step])
	}
	// The text of both commands prints the same mean.
	want := "5 leaves (mean reward " + fmtNum(*total.mean) + ")"
	if out := cli(t, "--server", o.url, "stats", "r").ok(t).stdout; !strings.Contains(out, want) {
		t.Errorf("stats --server does not say %q:\n%s", want, out)
	}
	if out := cli(t, "--server", o.url, "show", "r").ok(t).stdout; !strings.Contains(out, "5, mean reward "+fmtNum(*total.mean)) {
		t.Errorf("show does not print the mean %s:\n%s", fmtNum(*total.mean), out)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
