package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// treeGoldens are the golden cases of tree; remote_test.go runs them
// through a server too.
var treeGoldens = []goldenCase{
	{name: "tree", args: []string{"tree", "patr-4x4", "1"}},
	{name: "tree_step", args: []string{"tree", "patr-4x4", "step:1"}},
	{name: "tree_latest", args: []string{"tree", "patr-4x4", "latest"}},
	{name: "tree_color", args: []string{"tree", "patr-4x4", "1"}, env: testEnv{terminal: true}},
	{name: "tree_dot", args: []string{"tree", "patr-4x4", "step:1", "--format", "dot"}},
	{name: "tree_json", args: []string{"tree", "patr-4x4", "1", "--format", "json"}},
}

func TestTreeGolden(t *testing.T) { checkGoldens(t, treeGoldens) }

func TestTreeColour(t *testing.T) {
	path := fixture(t)
	args := []string{"--db", path, "tree", "patr-4x4", "1"}
	if out := cliEnv(t, testEnv{terminal: true}, args...).ok(t).stdout; !strings.Contains(out, "\x1b[31m3 pruned\x1b[0m") {
		t.Errorf("no colour on a terminal:\n%s", out)
	}
	noColor := testEnv{terminal: true, vars: map[string]string{"NO_COLOR": "1"}}
	for _, out := range []string{cliEnv(t, noColor, args...).ok(t).stdout, cli(t, args...).ok(t).stdout} {
		if strings.Contains(out, "\x1b[") {
			t.Errorf("colour with NO_COLOR or when piped:\n%q", out)
		}
	}
}

// Every node of the group appears exactly once, under its parent, and the
// JSON agrees with the text on which nodes exist.
func TestTreeJSONStructure(t *testing.T) {
	path := fixture(t)
	// --json is the same as --format json.
	r := cli(t, "--db", path, "tree", "patr-4x4", "step:1", "--json").ok(t)
	if r2 := cli(t, "--db", path, "tree", "patr-4x4", "step:1", "--format", "json").ok(t); r2.stdout != r.stdout {
		t.Error("--json and --format json differ")
	}
	var out treeOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Groups) != 2 {
		t.Fatalf("step:1 gave %d groups", len(out.Groups))
	}
	for _, g := range out.Groups {
		seen := map[uint64]bool{}
		adv := map[uint64]float64{}
		for _, ad := range g.Advantages {
			adv[ad.Leaf] = ad.Outcome
		}
		leaves := 0
		var walk func(parent uint64, depth int, nodes []treeNode)
		walk = func(parent uint64, depth int, nodes []treeNode) {
			for _, n := range nodes {
				if seen[n.ID] {
					t.Errorf("group %d: node %d twice", g.Group.ID, n.ID)
				}
				seen[n.ID] = true
				if n.Parent != parent || n.Depth != depth || n.Group != g.Group.ID {
					t.Errorf("node %d: parent %d depth %d group %d under %d at depth %d", n.ID, n.Parent, n.Depth, n.Group, parent, depth)
				}
				if outcome, ok := adv[n.ID]; ok {
					leaves++
					if !n.HasReward || n.Reward != outcome {
						t.Errorf("node %d: reward %v, advantage outcome %v", n.ID, n.Reward, outcome)
					}
				}
				walk(n.ID, depth+1, n.Children)
			}
		}
		walk(0, 0, g.Tree)
		if len(seen) == 0 || leaves != len(g.Advantages) {
			t.Errorf("group %d: %d nodes, %d of %d advantage records found on leaves of the tree", g.Group.ID, len(seen), leaves, len(g.Advantages))
		}
	}
}

// The DOT output is valid Graphviz when Graphviz is installed.
func TestTreeDotRenders(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil {
		t.Skip("graphviz not installed")
	}
	out := cli(t, "--db", fixture(t), "tree", "patr-4x4", "step:1", "--format", "dot").ok(t).stdout
	cmd := exec.Command(dot, "-Tsvg")
	cmd.Stdin = strings.NewReader(out)
	svg, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dot -Tsvg: %v\n%s", err, svg)
	}
	if !strings.Contains(string(svg), "fork@2") || !strings.Contains(string(svg), "#fcbba1") {
		t.Errorf("svg lacks the edge labels or status colours")
	}
}

func TestTreeErrors(t *testing.T) {
	path := fixture(t)
	for _, c := range []struct {
		args  []string
		code  int
		frags []string
	}{
		{[]string{"tree", "patr-4x4", "99"}, 1, []string{"group 99 not found", "patr-4x4"}},
		{[]string{"tree", "patr-4x4", "step:9"}, 1, []string{"step 9", "no groups"}},
		{[]string{"tree", "nope", "1"}, 1, []string{`run "nope" not found`}},
		{[]string{"tree", "patr-4x4", "abc"}, 2, []string{`GROUP "abc"`}},
		{[]string{"tree", "patr-4x4", "0"}, 2, []string{`GROUP "0"`}},
		{[]string{"tree", "patr-4x4", "step:x"}, 2, []string{`GROUP "step:x"`}},
		{[]string{"tree", "patr-4x4", "1", "--format", "svg"}, 2, []string{`--format "svg"`}},
		{[]string{"tree", "patr-4x4", "1", "--format", "dot", "--json"}, 2, []string{"--json and --format dot"}},
		{[]string{"tree", "patr-4x4"}, 2, []string{"tree takes RUN GROUP, got 1 argument"}},
	} {
		cli(t, append([]string{"--db", path}, c.args...)...).fails(t, c.code, c.frags...)
	}
}
