package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every entry of equivalent.txt names a mutant the tool makes of today's
// code. An entry whose line was rewritten, moved to another function or
// deleted matches nothing: it no longer excuses anything, and a mutant of
// the new code that survives needs a reason of its own. So a change that
// strands an entry fails here, naming it, until it is updated or removed.
func TestEquivalentEntriesNameLiveMutants(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	equiv, err := readEquivalents(filepath.Join(root, "tools/mutate/equivalent.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(equiv) == 0 {
		t.Fatal("equivalent.txt lists nothing")
	}
	keys := map[string]bool{}
	files := map[string]bool{}
	for k := range equiv {
		files[strings.SplitN(k, "\t", 2)[0]] = true
	}
	for f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Errorf("equivalent.txt names %s: %v", f, err)
			continue
		}
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range collect(fset, af, src, f) {
			keys[m.Key] = true
		}
	}
	for k := range equiv {
		if !keys[k] {
			t.Errorf("equivalent.txt names no mutant of today's code: %s", strings.ReplaceAll(k, "\t", " | "))
		}
	}
}
