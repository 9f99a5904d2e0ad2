package main

import (
	"encoding/json"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// frontierGoldens are the golden cases of frontier; remote_test.go runs them
// through a server too.
var frontierGoldens = []goldenCase{
	{name: "frontier", args: []string{"frontier", "patr-4x4"}},
	{name: "frontier_json", args: []string{"frontier", "patr-4x4", "--json"}},
	{name: "frontier_empty", args: []string{"frontier", "grpo-4x4"}},
}

func TestFrontierGolden(t *testing.T) { checkGoldens(t, frontierGoldens) }

func TestFrontierIsTheActiveNodes(t *testing.T) {
	path := fixture(t)
	var out frontierOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "frontier", "patr-4x4", "--json").ok(t).stdout), &out); err != nil {
		t.Fatal(err)
	}
	var tr treeOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "tree", "patr-4x4", "latest", "--json").ok(t).stdout), &tr); err != nil {
		t.Fatal(err)
	}
	active := map[uint64]bool{}
	var walk func([]treeNode)
	walk = func(ns []treeNode) {
		for _, n := range ns {
			if n.Status == model.NodeActive {
				active[n.ID] = true
			}
			walk(n.Children)
		}
	}
	walk(tr.Groups[0].Tree)
	if len(out.Nodes) != len(active) {
		t.Fatalf("frontier has %d nodes, the open tree %d active", len(out.Nodes), len(active))
	}
	for _, n := range out.Nodes {
		if !active[n.ID] {
			t.Errorf("frontier lists %d, which is not active", n.ID)
		}
	}
	var empty frontierOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "frontier", "grpo-4x4", "--json").ok(t).stdout), &empty); err != nil || empty.Nodes == nil || len(empty.Nodes) != 0 {
		t.Errorf("empty frontier --json: %+v %v", empty, err)
	}
	cli(t, "--db", path, "frontier", "nope").fails(t, 1, `run "nope" not found`)
}
