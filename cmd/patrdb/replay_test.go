package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
)

// replayGoldens are the golden cases of replay; remote_test.go runs them
// through a server too.
var replayGoldens = []goldenCase{
	{name: "replay", args: []string{"replay", "patr-4x4"}},
	{name: "replay_until", args: []string{"replay", "patr-4x4", "--from", "14", "--until", "24"}},
	{name: "replay_json", args: []string{"replay", "patr-4x4", "--until", "6", "--json"}},
	{name: "replay_whatif", args: []string{"replay", "patr-4x4", "--what-if", "delta=0.2,m=3"}},
	{name: "replay_whatif_json", args: []string{"replay", "patr-4x4", "--what-if", "top=0", "--json"}},
}

func TestReplayGolden(t *testing.T) { checkGoldens(t, replayGoldens) }

// TestReplayStateAtEnd: the state replay rebuilds after the last event is
// the file as the other commands read it.
func TestReplayStateAtEnd(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	var out replayOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "replay", "patr-4x4", "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Until != out.Last || uint64(len(out.Events)) != out.Last || out.Events[0].Seq != 1 || out.State.Seq != out.Last {
		t.Fatalf("from %d until %d last %d, %d events, state at %d", out.From, out.Until, out.Last, len(out.Events), out.State.Seq)
	}
	var fr frontierOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "frontier", "patr-4x4", "--json").ok(t).stdout), &fr); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for _, n := range fr.Nodes {
		want = append(want, n.ID)
	}
	if !equalUint64s(out.State.Frontier, want) {
		t.Errorf("replayed frontier %v, frontier command %v", out.State.Frontier, want)
	}
	var show showOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "show", "patr-4x4", "--json").ok(t).stdout), &show); err != nil {
		t.Fatal(err)
	}
	if out.State.Nodes != show.Nodes || out.State.Groups != show.Groups || out.State.OpenGroups != show.OpenGroups ||
		!equalCounts(out.State.NodesByStatus, byStatusNames(show.ByStatus)) || !equalCounts(out.State.RubricsByPool, show.RubricsByPool) ||
		out.State.LastStep != show.LastStep || out.State.Status != string(show.Status) {
		t.Errorf("replayed state %+v\nshow %+v", out.State, show)
	}
	// Part way: --until gives the events up to there and the state then.
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "replay", "patr-4x4", "--until", "10", "--from", "4", "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 7 || out.Events[0].Seq != 4 || out.State.Seq != 10 || out.State.LastStep != 0 {
		t.Errorf("--from 4 --until 10: %d events from %d, state at %d", len(out.Events), out.Events[0].Seq, out.State.Seq)
	}
	for _, e := range out.Events {
		if e.Summary == "" || e.Payload == nil {
			t.Errorf("event %d (%s): summary %q payload %s", e.Seq, e.Kind, e.Summary, e.Payload)
		}
	}
	if fileHash(t, path) != before {
		t.Error("replay changed the file")
	}
}

func equalUint64s(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func byStatusNames(m map[model.NodeStatus]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

func equalCounts(a, b map[string]int) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// TestReplayWhatIfReproducesDemo: on a run the trainer wrote, the recorded
// config gives back every decision; delta above 1 prunes nothing.
func TestReplayWhatIfReproducesDemo(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	cli(t, "--db", db, "demo", "--steps", "3", "--batch", "3", "--seed", "5").ok(t)
	var rep replay.WhatIfReport
	if err := json.Unmarshal([]byte(cli(t, "--db", db, "replay", "demo", "--what-if", "", "--json").ok(t).stdout), &rep); err != nil {
		t.Fatal(err)
	}
	tot := rep.Totals
	if !rep.BaseRecorded || tot.Decisions == 0 || tot.Differ != 0 || len(rep.Intervals) != 0 || tot.EnvSteps != tot.EnvStepsRecorded || tot.NodesReached != tot.NodesRecorded {
		t.Errorf("recorded config: %+v (base recorded %v)", tot, rep.BaseRecorded)
	}
	if err := json.Unmarshal([]byte(cli(t, "--db", db, "replay", "demo", "--what-if", "delta=1.5", "--json").ok(t).stdout), &rep); err != nil {
		t.Fatal(err)
	}
	for _, iv := range rep.Intervals {
		for _, d := range iv.Diffs {
			if d.WhatIf.Action == "prune" && d.WhatIf.Rule != "repeat" {
				t.Errorf("delta=1.5 pruned node %d by %s", d.Node, d.WhatIf.Rule)
			}
		}
	}
	if rep.Config.Delta != 1.5 || rep.Base.Delta == 1.5 {
		t.Errorf("configs: base %+v, what-if %+v", rep.Base, rep.Config)
	}
}

func TestReplayBadInput(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	cli(t, "--db", path, "replay", "nope").fails(t, 1, `run "nope" not found`)
	cli(t, "--db", path, "replay", "patr-4x4", "--until", "100000").fails(t, 2, "--until 100000", "ends at event")
	cli(t, "--db", path, "replay", "patr-4x4", "--until", "0").fails(t, 2, "--until")
	cli(t, "--db", path, "replay", "patr-4x4", "--until", "x").fails(t, 2, "--until")
	cli(t, "--db", path, "replay", "patr-4x4", "--from", "9", "--until", "3").fails(t, 2, "--from 9")
	cli(t, "--db", path, "replay", "patr-4x4", "--what-if", "k=3").fails(t, 2, "unknown what-if key", `"k"`)
	cli(t, "--db", path, "replay", "patr-4x4", "--what-if", "delta=wide").fails(t, 2, "delta")
	cli(t, "--db", path, "replay", "patr-4x4", "--what-if", "m=0").fails(t, 2, "M = 0")
	cli(t, "--db", path, "replay", "patr-4x4", "--what-if", "m=3", "--until", "5").fails(t, 2, "--until")
	cli(t, "--db", path, "replay", "patr-4x4", "--step", "1").fails(t, 2, "--what-if")
	cli(t, "--db", path, "replay", "patr-4x4", "--what-if", "m=3", "--step", "9").fails(t, 1, "no group")
	cli(t, "--db", path, "replay").fails(t, 2, "RUN")
	if fileHash(t, path) != before {
		t.Error("a failed replay changed the file")
	}
	r := cli(t, "--db", path, "replay", "patr-4x4", "--what-if", "m=3", "--step", "1", "--group", "2").ok(t)
	if !strings.Contains(r.stdout, "1 interval over 1 group") {
		t.Errorf("--step 1 --group 2:\n%s", r.stdout)
	}
}
