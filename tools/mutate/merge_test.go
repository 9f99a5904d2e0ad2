package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestMergeKeepsEachMutantsLastResult(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, rs []result) string {
		b, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	m := func(line int, key string) mutant { return mutant{File: "f.go", Line: line, Op: "delete", Key: key} }
	first := write("a.json", []result{
		{mutant: m(1, "k1"), Status: "lived"},
		{mutant: m(2, "k2"), Status: "lived"},
		{mutant: m(3, "k3"), Status: "killed"},
		{mutant: m(4, "k4"), Status: "equivalent", Reason: "no longer listed"},
	})
	rerun := write("b.json", []result{{mutant: m(1, "k1"), Status: "killed"}, {mutant: m(3, "k3"), Status: "skipped"},
		{mutant: m(5, "k5"), Status: "skipped"}})
	all, err := mergeResults([]string{first, rerun}, map[string]string{"k2": "same result"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"killed", "equivalent", "killed", "lived"}
	if len(all) != len(want) {
		t.Fatalf("%d results, want %d", len(all), len(want))
	}
	for i, r := range all {
		if r.Status != want[i] || r.Line != i+1 {
			t.Errorf("result %d: line %d %s, want line %d %s", i, r.Line, r.Status, i+1, want[i])
		}
	}
	if _, err := mergeResults([]string{filepath.Join(dir, "missing.json")}, nil); err == nil {
		t.Error("a missing file merged without an error")
	}
}
