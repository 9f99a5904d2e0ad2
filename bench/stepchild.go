package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/patrdb/patrdb/internal/workload"
)

// A step target's cell runs in a child process of the runner, whose heap
// holds that cell's workload and nothing else. In the runner's own
// process, the collection the harness forces before every transaction
// also scanned the ~290 MB the runner holds for its other figures (the
// LLM-sized and lake workloads, the batch step), and each scan left the
// caches cold for the transaction after it. That cost grows with the CPU
// a side spends, so the tiny-turn ratio moved with the size of other
// rows' workloads: -step-targets with a 290 MB ballast in its heap read
// about 0.02 lower than without (bench/RESULTS.md, the notes of
// 2026-12-06T07:26Z). The two sides still take turns transaction by
// transaction inside the child.
const stepEnv = "PATRDB_BENCH_STEP" // the child's stepSpec, JSON

// stepSpec is what the child needs to rebuild and measure one cell: the
// step target's size and everything of the runner's config that the
// cell's workload or contenders read.
type stepSpec struct {
	Size     string      `json:"size"` // matrixSize.flag
	Rep      int         `json:"rep"`  // the repetition: the contenders' order rotates with it
	Seed     uint64      `json:"seed"`
	Smoke    bool        `json:"smoke"`
	PageSize int         `json:"page_size"`
	Collect  collectMode `json:"collect"`
	Out      string      `json:"out"`
}

// stepCellOut is a matrixCell as the child reports it.
type stepCellOut struct {
	Size      string                  `json:"size"`
	Commit    string                  `json:"commit"`
	Txns      int                     `json:"txns"`
	Turns     int                     `json:"turns"`
	TurnBytes int64                   `json:"turn_bytes"`
	Res       map[string]appendResult `json:"res"`
}

// measure is one repetition of ts's cell, run in a child process (see
// stepEnv).
func (ts targetStep) measure(cfg config, rep int) (matrixCell, error) {
	fail := func(err error) (matrixCell, error) {
		return matrixCell{}, fmt.Errorf("append, %s turns: %w", ts.size.name, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("the step cells run in a child process of the runner's executable: %w", err))
	}
	spec, err := json.Marshal(stepSpec{Size: ts.size.flag, Rep: rep, Seed: cfg.Seed, Smoke: cfg.Smoke,
		PageSize: cfg.PageSize, Collect: cfg.Collect, Out: cfg.Out})
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), stepEnv+"="+string(spec))
	if os.Getenv("GORACE") == "" {
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0") // as measureRSS
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fail(fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes())))
	}
	var co stepCellOut
	if err := json.Unmarshal(out, &co); err != nil {
		return fail(fmt.Errorf("child output %q: %w", out, err))
	}
	// The child rebuilt the workload from the seed: it must be this one.
	if co.Turns != ts.batch.Stats.Turns || co.Txns != len(ts.batch.Txns) {
		return fail(fmt.Errorf("the child measured %d turns in %d transactions, the runner's step holds %d in %d",
			co.Turns, co.Txns, ts.batch.Stats.Turns, len(ts.batch.Txns)))
	}
	return matrixCell{size: co.Size, commit: co.Commit, txns: co.Txns, turns: co.Turns, turnBytes: co.TurnBytes, res: co.Res}, nil
}

// measureHere is one repetition of ts's cell in this process: its
// contenders side by side through its step commits.
func (ts targetStep) measureHere(cfg config, rep int) (matrixCell, error) {
	return runMatrixCell(cfg, targetStepContenders, ts.size.name, matrixCommitNames[1], []workload.Batch{ts.batch}, rep)
}

// stepChildMain is the child's side of measure: it measures the cell the
// spec names and writes it to stdout.
func stepChildMain(specJSON string) int {
	var spec stepSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "bench step child:", err)
		return 2
	}
	cfg := config{Seed: spec.Seed, Smoke: spec.Smoke, PageSize: spec.PageSize, Collect: spec.Collect, Out: spec.Out}
	steps, err := targetSteps(cfg, spec.Size)
	if err == nil && len(steps) != 1 {
		err = fmt.Errorf("%q is not a step target's size", spec.Size)
	}
	var c matrixCell
	if err == nil {
		// The cell before deleted its files: the file system is flushed
		// before the clock starts, as run does before its append runs.
		settle(filepath.Join(cfg.Out, "matrix"))
		c, err = steps[0].measureHere(cfg, spec.Rep)
	}
	if err == nil {
		err = json.NewEncoder(os.Stdout).Encode(stepCellOut{Size: c.size, Commit: c.commit, Txns: c.txns, Turns: c.turns, TurnBytes: c.turnBytes, Res: c.res})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench step child:", err)
		return 1
	}
	return 0
}
