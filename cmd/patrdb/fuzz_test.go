package main

import (
	"strings"
	"testing"
)

// FuzzArgs feeds arbitrary command lines to the CLI over the golden
// fixture: whatever the arguments, it must exit 0, 1 or 2, never panic, and
// a failure must be exactly one "patrdb: " line on stderr. Commands that
// write (demo, serve, compact, export) are left out: their flags are covered
// by their own tests and a fuzzer must not train or listen.
func FuzzArgs(f *testing.F) {
	for _, seed := range []string{
		"runs", "show patr-4x4", "tree patr-4x4 latest --format dot", "tree patr-4x4 step:1 --format json",
		"traj patr-4x4 4 --json", "frontier patr-4x4", "rubrics patr-4x4 --pool all --lineage 4",
		"adv patr-4x4 --step 1", "replay patr-4x4 --until 5", "replay patr-4x4 --what-if delta=0.3,m=3",
		"stats", "check --json", "tree patr-4x4 999", "traj nope 1", "show", "adv patr-4x4 --step x",
		"--timeout -1s runs", "rubrics patr-4x4 --pool bogus", "replay patr-4x4 --what-if nope=1",
	} {
		f.Add(seed)
	}
	path := fixture(f)
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		for _, a := range args {
			switch a {
			case "demo", "serve", "compact", "export", "completion", "--server", "--db", "--token-file":
				return
			}
		}
		args = append([]string{"--db", path, "--timeout", "100ms"}, args...)
		r := cliEnv(t, testEnv{}, args...)
		switch r.code {
		case 0:
		case 1, 2:
			if !strings.HasPrefix(r.stderr, "patrdb: ") || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("%q: exit %d with stderr %q, want one \"patrdb: \" line", line, r.code, r.stderr)
			}
		default:
			t.Fatalf("%q: exit %d", line, r.code)
		}
	})
}
