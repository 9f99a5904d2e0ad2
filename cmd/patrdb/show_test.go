package main

import (
	"encoding/json"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// showGoldens are the golden cases of show; remote_test.go runs them
// through a server too.
var showGoldens = []goldenCase{
	{name: "show", args: []string{"show", "patr-4x4"}},
	{name: "show_json", args: []string{"show", "patr-4x4", "--json"}},
	{name: "show_grpo", args: []string{"show", "grpo-4x4"}},
	{name: "show_bytes", args: []string{"show", "patr-4x4", "--bytes"}},
}

func TestShowGolden(t *testing.T) { checkGoldens(t, showGoldens) }

func TestShowProgress(t *testing.T) {
	path := fixture(t)
	var out showOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "show", "patr-4x4", "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.LastStep != 1 || len(out.Steps) != 2 || !out.Steps[0].Checkpoint || out.Steps[1].Checkpoint || out.Steps[1].OpenGroups != 1 {
		t.Errorf("steps = %+v (last %d)", out.Steps, out.LastStep)
	}
	if out.Checkpoint == nil || out.Checkpoint.Step != 1 || out.Checkpoint.InlineBytes == 0 {
		t.Errorf("checkpoint = %+v", out.Checkpoint)
	}
	total := 0
	for _, c := range out.ByStatus {
		total += c
	}
	if total != out.Nodes || out.ByStatus[model.NodeActive] != out.Frontier || out.Frontier != 4 {
		t.Errorf("nodes %d by status %v, frontier %d", out.Nodes, out.ByStatus, out.Frontier)
	}
	if out.Buckets != nil || out.Bytes != 0 {
		t.Errorf("bytes without --bytes: %d %v", out.Bytes, out.Buckets)
	}
	var cfg map[string]any
	if err := json.Unmarshal(out.Config, &cfg); err != nil || cfg["tree"] == nil {
		t.Errorf("config is not the run's JSON: %s", out.Config)
	}
}

func TestShowErrors(t *testing.T) {
	path := fixture(t)
	cli(t, "--db", path, "show", "nope").fails(t, 1, `run "nope" not found`, path)
	cli(t, "--db", path, "show", "bad/id").fails(t, 2, `RUN "bad/id"`)
	cli(t, "--db", path, "show").fails(t, 2, "show takes RUN, got 0 arguments")
	cli(t, "--db", path, "show", "a", "b").fails(t, 2, "show takes RUN, got 2 arguments")
}
