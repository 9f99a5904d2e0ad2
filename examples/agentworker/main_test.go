package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// TestAgentLoop runs the example small: tool calls of 3 × the lease TTL
// under heartbeats, rewards from the verifier, each step's groups closed,
// and the run ends at version 3 with the file clean.
func TestAgentLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	var out bytes.Buffer
	if err := run([]string{"-db", path, "-steps", "2", "-tasks", "2", "-ttl", "300ms", "-slow", "900ms", "-verify-after", "50ms"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	// (A lease may still be lost on a machine so loaded that a heartbeat
	// comes late; its branch is done again, and the step completes.)
	if len(lines) != 2 || !strings.Contains(lines[0], "step 1: 2 groups closed") || !strings.Contains(lines[1], "version 3 published") ||
		strings.Contains(lines[0], " 0 rewards from the verifier") {
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
	err = db.ViewRun("agent-1", func(r *store.RunTx) error {
		info, err := r.Info()
		if err != nil || info.LastStep != 2 || info.PolicyVersion != 3 {
			t.Fatalf("run %+v %v", info, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
