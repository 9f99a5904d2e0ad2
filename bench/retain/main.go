// Command retain measures a bounded live file: an LLM-shaped run
// (internal/llmfake: 200–600 action tokens with logprobs, 1–4 KB
// observations, episodes of 10–30 turns) grown step after step through
// tree.Engine while a lake.Follower exports each checkpointed step into a
// folder lake and drops from the file the steps older than the last
// -keep, as patrdb serve --lake DIR --keep-steps N does. It prints the
// file's size (and bbolt's pages in use) at every -every-th step and a
// Markdown summary for bench/RESULTS.md.
//
//	go run ./bench/retain                          # 200 steps of 16 tasks, keep 10
//	go run ./bench/retain -steps 40 -tasks 4       # a quick look
//
// Target: at the last step the file is within 1.2× of its size at step 20,
// while the lake holds every step.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

func main() {
	steps := flag.Int("steps", 200, "steps to run")
	keep := flag.Uint64("keep", 10, "checkpointed steps kept in the file")
	tasks := flag.Int("tasks", 16, "tasks (trees) per step")
	ref := flag.Int("ref", 20, "the step whose file size is the reference")
	every := flag.Int("every", 10, "print a row every this many steps")
	dir := flag.String("dir", "", "work directory (default: a temporary one, removed at the end)")
	sync := flag.Bool("sync", false, "fsync every commit (the sizes do not depend on it)")
	flag.Parse()
	if err := run(*steps, *keep, *tasks, *ref, *every, *dir, *sync); err != nil {
		fmt.Fprintln(os.Stderr, "retain:", err)
		os.Exit(1)
	}
}

func run(steps int, keep uint64, tasks, ref, every int, dir string, sync bool) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "patrdb-retain-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	path := filepath.Join(dir, "live.db")
	o := store.DefaultOptions()
	o.NoSync = !sync
	db, err := store.Open(path, o)
	if err != nil {
		return err
	}
	defer db.Close()
	const id = "llm"
	cfg := tree.DefaultConfig()
	cfg.MaxTurns, cfg.Seed = 30, 1
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(id, runconfig.Config{Tree: cfg}.JSON(), nil)
		return err
	}); err != nil {
		return err
	}
	lk, err := lake.Open(filepath.Join(dir, "lake"), nil)
	if err != nil {
		return err
	}
	follower, err := lk.Follow(db, lake.FollowOptions{KeepSteps: keep, Interval: time.Hour})
	if err != nil {
		return err
	}
	defer follower.Close()
	policy := &llmfake.Policy{}
	engine, err := tree.New(db, id, tree.Options{Config: cfg, BatchPolicy: policy, Env: &llmfake.Env{}, Scorer: llmfake.Scorer{}})
	if err != nil {
		return err
	}
	ctx := context.Background()
	fmt.Printf("%s, %d tasks a step, keep %d steps, fsync %v\n\n", time.Now().UTC().Format("2006-01-02T15:04Z"), tasks, keep, sync)
	fmt.Println("| step | file | pages in use | lake | turns this step |")
	fmt.Println("|---|---|---|---|---|")
	var atRef, atEnd, peak int64
	start := time.Now()
	for step := uint64(1); step <= uint64(steps); step++ {
		policy.Version = step
		res, err := engine.Rollout(ctx, step, llmfake.Tasks(tasks))
		if err != nil {
			return err
		}
		if err := db.UpdateRun(id, func(r *store.RunTx) error {
			return r.PutCheckpoint(model.Checkpoint{Step: step, URI: fmt.Sprintf("file:///ckpt/%d", step)})
		}); err != nil {
			return err
		}
		// What serve --lake does within a second of the checkpoint.
		if err := follower.Sync(ctx); err != nil {
			return err
		}
		file, used := sizes(db, path)
		peak = max(peak, file)
		if int(step) == ref {
			atRef = file
		}
		atEnd = file
		if int(step)%every == 0 || int(step) == ref || step == 1 {
			fmt.Printf("| %d | %s | %s | %s | %d |\n", step, mb(file), mb(used), mb(dirSize(filepath.Join(dir, "lake"))), res.EnvSteps)
		}
	}
	if err := follower.Close(); err != nil {
		return err
	}
	m, err := lk.Manifest(ctx, id)
	if err != nil {
		return err
	}
	vs, err := db.Check(nil) // a damaged file is reported by count below
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		return err
	}
	var info model.Run
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(id)
		if err == nil {
			info, err = r.Info()
		}
		return err
	}); err != nil {
		return err
	}
	fmt.Printf("\n%d steps in %v. File at step %d: %s; at step %d: %s (%.2f× step %d; largest %s). ",
		steps, time.Since(start).Round(time.Second), ref, mb(atRef), steps, mb(atEnd), float64(atEnd)/float64(atRef), ref, mb(peak))
	fmt.Printf("The lake holds steps 1–%d (%s); the file holds steps %d–%d; check: %d violations.\n",
		m.Step, mb(dirSize(filepath.Join(dir, "lake"))), info.DroppedStep+1, info.LastStep, len(vs))
	return nil
}

// sizes are the file's size and bbolt's pages in use (its high-water mark).
func sizes(db *store.DB, path string) (file, used int64) {
	if fi, err := os.Stat(path); err == nil {
		file = fi.Size()
	}
	_ = storetest.Bolt(db).View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	return file, used
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
