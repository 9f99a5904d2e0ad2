package main

import (
	"encoding/json"
	"testing"

	"github.com/patrdb/patrdb/replay"
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
			p = r
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
