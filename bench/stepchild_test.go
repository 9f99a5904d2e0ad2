package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStepCellChildFailsLoudly: a step cell whose child cannot run says
// why, with the child's own words, instead of yielding an empty cell.
func TestStepCellChildFailsLoudly(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	cfg := smokeConfig(defaultConfig(moduleRoot()))
	steps, err := targetSteps(cfg, "tiny")
	if err != nil || len(steps) != 1 {
		t.Fatalf("targetSteps(tiny): %d steps, %v", len(steps), err)
	}
	// The work directory is a file: the child cannot make its own in it.
	cfg.Out = filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(cfg.Out, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = steps[0].measure(cfg, 0)
	if err == nil || !strings.Contains(err.Error(), "bench step child:") || !strings.Contains(err.Error(), "tiny turns") {
		t.Fatalf("measure in a file: %v; want the child's error, naming the cell", err)
	}
	if code := stepChildMain(`{"size":"10kb"}`); code == 0 {
		t.Error("a child asked for a size with no step target exited 0")
	}
	if code := stepChildMain(`{`); code == 0 {
		t.Error("a child given a broken spec exited 0")
	}
}

// TestAppendResultAddPools: pooling two passes keeps every rate and every
// per-tree figure, and keeps the slower pass's slowest transaction.
func TestAppendResultAddPools(t *testing.T) {
	a := appendResult{Seconds: 2, Commit: 1, Slowest: 0.3, Txns: 4, Turns: 100, TurnBytes: 1000, Trees: 8, Disk: 4096, Apparent: 8192}
	b := appendResult{Seconds: 3, Commit: 2, Slowest: 0.5, Txns: 4, Turns: 100, TurnBytes: 1000, Trees: 8, Disk: 4096, Apparent: 8192}
	p := appendResult{}.add(a).add(b)
	if p.turnsPerSec() != 200.0/5 || p.diskPerTree() != a.diskPerTree() || p.Slowest != 0.5 || p.Txns != 8 || p.Commit != 3 || p.Apparent != 16384 {
		t.Errorf("pooled %+v", p)
	}
}
