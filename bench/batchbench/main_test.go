package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/bench/batchmeasure"
)

// TestSmoke runs every Go figure at a tiny size and rewrites a copy of a
// RESULTS.md twice: the section is replaced, not appended again, and what
// is above it stays.
func TestSmoke(t *testing.T) {
	c := config{reps: 1, iters: 1, step: batchmeasure.Smoke()}
	section, err := run(c, "go test")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{beginMarker, endMarker, "ReadInto", "memcpy of", "tree layout on the wire"} {
		if !strings.Contains(section, want) {
			t.Errorf("section lacks %q:\n%s", want, section)
		}
	}
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := os.WriteFile(path, []byte("# results\n\n<!-- notes -->\nkept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := writeSection(path, section); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	if doc := string(b); strings.Count(doc, beginMarker) != 1 || !strings.HasPrefix(doc, "# results\n\n<!-- notes -->\nkept\n") {
		t.Errorf("RESULTS.md after two runs:\n%s", doc)
	}
}
