package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// TestTrainerRunsAndResumes runs the example at a tiny size, then again
// for more steps: the second run continues after the last completed step,
// and the file checks clean.
func TestTrainerRunsAndResumes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llm.db")
	var out bytes.Buffer
	if err := run([]string{"-db", path, "-steps", "1", "-tasks", "3", "-latency", "1ms"}, &out); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-db", path, "-steps", "2", "-tasks", "3", "-latency", "1ms"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "step 1:") || !strings.HasPrefix(lines[1], "step 2:") {
		t.Fatalf("output:\n%s", out.String())
	}
	db, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
	err = db.ViewRun("llm-1", func(r *store.RunTx) error {
		info, _ := r.Info()
		if info.LastStep != 2 {
			t.Errorf("last step %d, want 2", info.LastStep)
		}
		gs, err := r.Groups(2)
		if err != nil || len(gs) != 3 || len(gs[0].PromptTokens) != 300 {
			t.Fatalf("step 2 groups %d (%v), prompt tokens %d", len(gs), err, len(gs[0].PromptTokens))
		}
		tr, err := r.Trajectory(gs[0].Roots[0])
		if err != nil || len(tr) == 0 || tr[0].PolicyVersion != 2 || len(tr[0].ActionLogprobs) != len(tr[0].ActionTokens) {
			t.Errorf("a step-2 turn: %d turns, %v", len(tr), err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
