package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCorruptFixtures runs `patrdb check` (text and --json) on each
// broken file committed under store/testdata/corrupt: every one must be
// reported, with exit 1, and left byte-identical. The expected output is
// golden, so a change in what check says about damage is a reviewed diff.
func TestCheckCorruptFixtures(t *testing.T) {
	fixtures, err := filepath.Glob(filepath.Join("..", "..", "store", "testdata", "corrupt", "*.db"))
	if err != nil || len(fixtures) < 6 {
		t.Fatalf("want the six corrupt fixtures, found %v (%v)", fixtures, err)
	}
	for _, src := range fixtures {
		name := strings.TrimSuffix(filepath.Base(src), ".db")
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name+".db")
			raw, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			before := fileHash(t, path)
			for _, json := range []bool{false, true} {
				args := []string{"check", "--db", path}
				suffix := ""
				if json {
					args, suffix = append(args, "--json"), "_json"
				}
				r := cli(t, args...)
				if r.code != exitFail {
					t.Errorf("exit %d, want 1; stderr %q", r.code, r.stderr)
				}
				oneErrorLine(t, r.stderr)
				got := strings.ReplaceAll(r.stdout+"--- stderr\n"+r.stderr, dir, "<dir>")
				golden(t, "check_corrupt_"+name+suffix, got)
			}
			if fileHash(t, path) != before {
				t.Error("check changed the damaged file")
			}
		})
	}
}
