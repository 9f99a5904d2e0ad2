package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The help page's command groups, and each command's group.
var (
	helpGroups = []*cobra.Group{
		{ID: "read", Title: "Reading runs:"},
		{ID: "write", Title: "Writing and serving:"},
		{ID: "file", Title: "The file:"},
	}
	commandGroup = map[string]string{
		"runs": "read", "show": "read", "tree": "read", "traj": "read", "frontier": "read", "rubrics": "read",
		"adv": "read", "replay": "read", "stats": "read",
		"demo": "write", "serve": "write", "export": "write", "plot": "write", "batch": "write", "mark": "write",
		"restore": "write",
		"check":   "file", "compact": "file", "migrate": "file", "backup": "file", "retain": "file",
		"completion": "file", "version": "file",
	}
)

// commandExamples are the Example: lines of each command's help.
var commandExamples = map[string]string{
	"runs":     "patrdb runs --db patr.db\npatrdb runs --json | jq '.runs[].run'",
	"show":     "patrdb show demo\npatrdb show demo --json | jq .config",
	"tree":     "patrdb tree demo latest\npatrdb tree demo step:3 --format dot | dot -Tsvg > tree.svg",
	"traj":     "patrdb traj demo 42\npatrdb traj demo 42 --json | jq '.turns[].action'",
	"frontier": "patrdb frontier demo",
	"rubrics":  "patrdb rubrics demo --pool public\npatrdb rubrics demo --lineage 7",
	"adv":      "patrdb adv demo --step 3",
	"replay":   "patrdb replay demo --until 120\npatrdb replay demo --what-if delta=0.3,m=3",
	"stats":    "patrdb stats\npatrdb stats demo --json",
	"export":   "patrdb export demo --format parquet --out lake/\npatrdb export demo --format parquet --out s3://bucket/lake --as demo-2",
	"backup":   "patrdb backup --db patr.db --out patr-backup.db",
	"retain":   "patrdb retain demo --keep-steps 10 --lake s3://bucket/lake",
	"restore":  "patrdb restore s3://bucket/lake --run demo --out demo.db",
	"mark":     "patrdb mark demo finished",
	"check":    "patrdb check --db patr.db",
	"compact":  "patrdb compact --db patr.db --out patr-compact.db",
	"demo":     "patrdb demo --steps 20 --batch 8 --seed 1\npatrdb demo --mode both --map 8x8 --rubrics",
	"serve":    "patrdb serve --db patr.db --addr 127.0.0.1:8080\npatrdb serve --db patr.db --lake s3://bucket/lake --keep-steps 10",
	"plot":     "patrdb plot patr-1 grpo-1 --out curves.svg",
	"batch":    "patrdb batch demo --step 3 --out step3.safetensors",
	"migrate":  "patrdb migrate --db old.db",
	"version":  "patrdb version\npatrdb --version",
}

// organiseHelp puts each command in its group and gives it its examples;
// a command added without either shows up in TestEveryCommandHasHelp.
func organiseHelp(root *cobra.Command) {
	root.AddGroup(helpGroups...)
	root.SetHelpCommandGroupID("file")
	for _, c := range root.Commands() {
		name := c.Name()
		if g, ok := commandGroup[name]; ok && c.GroupID == "" {
			c.GroupID = g
		}
		if ex, ok := commandExamples[name]; ok && c.Example == "" {
			c.Example = "  " + strings.ReplaceAll(ex, "\n", "\n  ")
		}
	}
}

// suggest names the commands close to an unknown one, as one clause.
func suggest(cmd *cobra.Command, err error) string {
	var name string
	if _, err := fmt.Sscanf(err.Error(), "unknown command %q", &name); err != nil || cmd.HasParent() {
		return ""
	}
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		return ": did you mean " + orList(s) + "?"
	}
	return ""
}

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
