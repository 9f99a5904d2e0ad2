package main

import (
	"regexp"
	"strings"
	"testing"
)

// The help page groups the commands; each command's help has examples.
func TestHelpGolden(t *testing.T) {
	golden(t, "help", cli(t, "--help").ok(t).stdout)
	golden(t, "help_tree", cli(t, "tree", "--help").ok(t).stdout)
}

func TestEveryCommandHasHelp(t *testing.T) {
	root := newRootCommand(&App{getenv: func(string) string { return "" }})
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			continue
		}
		if c.GroupID == "" {
			t.Errorf("%s is in no help group", c.Name())
		}
		if c.Name() != "completion" && !strings.Contains(c.Example, "patrdb "+c.Name()) {
			t.Errorf("%s has no Example: using it", c.Name())
		}
	}
}

// --version and version print the same one line: module version, and the
// commit when the build recorded one.
func TestVersion(t *testing.T) {
	a := cli(t, "--version").ok(t).stdout
	b := cli(t, "version").ok(t).stdout
	if a != b || !regexp.MustCompile(`^patrdb (v\S+|\(devel\))( \(commit [0-9a-f]{1,12}(, modified)?\))? go\S+\n$`).MatchString(a) {
		t.Errorf("--version %q, version %q", a, b)
	}
	cli(t, "version", "extra").fails(t, 2)
}

// A mistyped command gets one line naming the close ones.
func TestUnknownCommandSuggests(t *testing.T) {
	r := cli(t, "tre")
	r.fails(t, 2)
	golden(t, "unknown_command", r.stderr)
	r = cli(t, "--db", "x.db", "frontierr", "run")
	r.fails(t, 2, "did you mean frontier?")
	cli(t, "zzzzzz").fails(t, 2, `unknown command "zzzzzz"`)
	if strings.Contains(cli(t, "zzzzzz").stderr, "did you mean") {
		t.Error("suggested a command for a name close to none")
	}
}

// A run that is not there is named with the runs that are.
func TestRunNotFoundListsRuns(t *testing.T) {
	cli(t, "--db", fixture(t), "show", "patr-4x").fails(t, 1, `run "patr-4x" not found`, "runs: ", "patr-4x4")
}
