package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

// `__complete` (what the shells' completion scripts call) offers the
// file's runs for a run argument, and "latest" and the run's groups for a
// group argument.
func TestCompletionOffersRunsAndGroups(t *testing.T) {
	path := fixture(t)
	complete := func(args ...string) string {
		t.Helper()
		r := cli(t, append([]string{"--db", path, "__complete"}, args...)...)
		if r.code != 0 {
			t.Fatalf("__complete %q: exit %d, %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	runs := strings.Fields(strings.Split(complete("show", ""), ":")[0])
	if len(runs) == 0 || !strings.Contains(cli(t, "--db", path, "runs").ok(t).stdout, runs[0]) {
		t.Fatalf("completing a run: %q", runs)
	}
	out := complete("tree", runs[0], "")
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "latest\t") || len(lines) < 3 || !strings.Contains(lines[1], "\tstep ") {
		t.Fatalf("completing a group of %s:\n%s", runs[0], out)
	}
	if out := complete("tree", "no-such-run", ""); strings.Contains(out, "latest") {
		t.Fatalf("completing a group of an unknown run offered %q", out)
	}
}

// `version --json` is one JSON object naming the build, the format it
// writes and the API it serves.
func TestVersionJSON(t *testing.T) {
	var v versionOutput
	out := cli(t, "version", "--json").ok(t).stdout
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("version --json: %v: %q", err, out)
	}
	if v.Version == "" || !strings.HasPrefix(v.Go, "go") || v.Format != store.FormatVersion || v.API != server.APISpecVersion() {
		t.Fatalf("version --json: %+v", v)
	}
}
