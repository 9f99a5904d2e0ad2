// Command llmtrainer is a Go trainer loop to copy: PaTR rollouts of an
// LLM agent into a patrdb store, one step at a time, resumable after a
// crash. The policy, environment and scorer are llmfake's stand-ins; put
// your inference client (one ActBatch call per batch of branches), your
// sandbox and your process reward model in their place.
//
//	go run ./examples/llmtrainer -db /tmp/llm.db -steps 2 -tasks 8
//	go run ./examples/llmtrainer -db /tmp/llm.db -steps 4 -tasks 8   # continues at step 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llmtrainer:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("llmtrainer", flag.ContinueOnError)
	path := fs.String("db", "llm.db", "store file")
	runID := fs.String("run", "llm-1", "run id")
	steps := fs.Int("steps", 2, "train until this step is complete")
	ntasks := fs.Int("tasks", 8, "tasks (trees) per step")
	latency := fs.Duration("latency", 20*time.Millisecond, "fake policy latency per batch call")
	maxBatch := fs.Int("max-batch", 0, "requests per policy call (0: every branch that needs a turn)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	db, err := store.Open(*path, nil) // nil: DefaultOptions(), fsync on
	if err != nil {
		return err
	}
	defer db.Close()

	cfg := tree.DefaultConfig() // B0=4, K=5, M=2, top-2, delta 0.5
	cfg.MaxTurns, cfg.Seed = 30, 1
	// The run records its config once; a resume with another config is
	// refused (tree.ErrConfigMismatch) rather than silently mixing two.
	last := uint64(0)
	err = db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(*runID)
		if errors.Is(err, model.ErrNotFound) {
			_, err = tx.CreateRun(*runID, runconfig.Config{Tree: cfg}.JSON(), map[string]string{"model": "fake-0.5b", "trainer": "llmtrainer"})
			return err
		}
		if err != nil {
			return err
		}
		info, err := r.Info()
		if err != nil {
			return err
		}
		last = info.LastStep
		if info.Status != model.RunRunning && last < uint64(*steps) {
			return r.SetRunStatus(model.RunRunning) // trained further than it was marked finished
		}
		return nil
	})
	if err != nil {
		return err
	}

	policy := &llmfake.Policy{Latency: *latency}
	for step := last + 1; step <= uint64(*steps); step++ {
		policy.Version = step // the weights after step-1 updates
		// The engine leases with the version of the weights it samples with
		// (a run whose max_staleness it exceeds refuses it).
		engine, err := tree.New(db, *runID, tree.Options{
			Config:        cfg,
			BatchPolicy:   policy,
			Env:           &llmfake.Env{},
			Scorer:        llmfake.Scorer{},
			MaxBatch:      *maxBatch,
			PolicyVersion: step,
		})
		if err != nil {
			return err
		}
		start := time.Now()
		// Rollout continues a step a crash interrupted (same tasks), or
		// opens it.
		res, err := engine.Rollout(ctx, step, llmfake.Tasks(*ntasks))
		if err != nil {
			return err
		}
		leaves, zeroVar := 0, 0
		for _, g := range res.Groups {
			leaves += len(g.Leaves)
			if len(g.Advantages) > 0 && g.Advantages[0].ZeroVariance {
				zeroVar++
			}
		}
		// ... your optimizer step on the leaves' tokens and advantages ...
		// The new weights' version is published (staleness is measured
		// against it) and the checkpoint marks the step complete, in one
		// transaction; the weights themselves live on a file system.
		err = db.Update(func(tx *store.Tx) error {
			if err := engine.Coordinator().Publish(tx, step+1); err != nil {
				return err
			}
			r, err := tx.Run(*runID)
			if err != nil {
				return err
			}
			if err := r.PutCheckpoint(model.Checkpoint{Step: step, URI: fmt.Sprintf("file:///ckpt/%s/%d", *runID, step)}); err != nil {
				return err
			}
			if step == uint64(*steps) {
				return r.SetRunStatus(model.RunFinished) // every step is in: the lake exports the last one too
			}
			return nil
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "step %d: %d groups, %d leaves, %d zero-variance groups, %d turns in %d policy calls (largest batch %d), %d failed branches, %s\n",
			step, len(res.Groups), leaves, zeroVar, res.EnvSteps, res.PolicyCalls, res.MaxBatch, res.Failed, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
