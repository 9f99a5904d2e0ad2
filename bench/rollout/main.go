// Command rollout measures one PaTR rollout step of an LLM-shaped agent
// workload (internal/llmfake: a policy of fixed latency per batch call,
// 200–600 action tokens with logprobs and 1–4 KB observations per turn,
// episodes of 10–30 turns) through tree.Engine, batched and serial, fsync
// on, and prints a Markdown table for bench/RESULTS.md.
//
//	go run ./bench/rollout                       # 32 tasks, 20 ms per call, 5 batched reps, 1 serial
//	go run ./bench/rollout -tasks 8 -reps 1 -serial=false
//
// Targets: a step makes at most turns/20 policy calls, and its wall time is
// within 2× of policy calls × latency (the policy is the bottleneck, not
// the store or the engine).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

type measurement struct {
	wall    time.Duration
	calls   int
	largest int
	turns   int
}

func main() {
	tasks := flag.Int("tasks", 32, "tasks (trees) in the step")
	latency := flag.Duration("latency", 20*time.Millisecond, "policy latency per batch call")
	reps := flag.Int("reps", 5, "batched repetitions")
	serial := flag.Bool("serial", true, "also measure the serial engine (one branch per call, one worker) once")
	dir := flag.String("dir", "", "work directory (default: a temporary one)")
	nosync := flag.Bool("nosync", false, "open the store with NoSync (engine overhead without the disk)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the batched repetitions")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "rollout:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	noSync = *nosync
	if err := run(*tasks, *latency, *reps, *serial, *dir); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "rollout:", err)
		os.Exit(1)
	}
}

// noSync opens the stores with NoSync (-nosync).
var noSync bool

func step(path string, ntasks int, latency time.Duration, maxBatch, workers int, mode tree.CommitMode) (measurement, error) {
	opts := store.DefaultOptions()
	opts.NoSync = noSync
	db, err := store.Open(path, opts)
	if err != nil {
		return measurement{}, err
	}
	defer db.Close()
	cfg := tree.DefaultConfig()
	cfg.MaxTurns, cfg.Seed = 30, 1
	conf := runconfig.Config{Tree: cfg}.JSON()
	if err := db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun("bench", conf, nil); return err }); err != nil {
		return measurement{}, err
	}
	e, err := tree.New(db, "bench", tree.Options{Config: cfg, BatchPolicy: &llmfake.Policy{Latency: latency, Version: 1},
		Env: &llmfake.Env{}, Scorer: llmfake.Scorer{}, MaxBatch: maxBatch, Workers: workers, Commit: mode})
	if err != nil {
		return measurement{}, err
	}
	start := time.Now()
	res, err := e.Rollout(context.Background(), 1, llmfake.Tasks(ntasks))
	if err != nil {
		return measurement{}, err
	}
	return measurement{wall: time.Since(start), calls: res.PolicyCalls, largest: res.MaxBatch, turns: res.EnvSteps}, nil
}

func run(ntasks int, latency time.Duration, reps int, serial bool, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "patrdb-rollout-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	modes := []struct {
		name string
		mode tree.CommitMode
	}{{"batched, one commit per wave (CommitInterval)", tree.CommitInterval}, {"batched, rounds committed while the next samples (CommitTurn)", tree.CommitTurn}}
	var b strings.Builder
	sync := "fsync on"
	if noSync {
		sync = "NoSync (the engine without the disk)"
	}
	fmt.Fprintf(&b, "### Rollout step, LLM-shaped (`go run ./bench/rollout -tasks %d -latency %v -reps %d`)\n\n", ntasks, latency, reps)
	fmt.Fprintf(&b, "%s, Go %s. One step of %d tasks, B0=4 K=5 M=2 top-2, paths capped at 30 turns, MaxBatch all, 8 workers, %s. The two batched modes alternate repetition by repetition.\n\n", time.Now().UTC().Format("2006-01-02"), strings.TrimPrefix(runtime.Version(), "go"), ntasks, sync)
	fmt.Fprintln(&b, "| engine | turns | policy calls | largest batch | turns per call | wall (median, min–max) | policy floor (calls × latency) | wall ÷ floor |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|---|---|")
	runs := make([][]measurement, len(modes))
	for i := range reps {
		for mi, m := range modes {
			got, err := step(filepath.Join(dir, fmt.Sprintf("batched-%d-%d.db", mi, i)), ntasks, latency, 0, 0, m.mode)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s rep %d: %v, %d calls, %d turns\n", m.name, i+1, got.wall, got.calls, got.turns)
			runs[mi] = append(runs[mi], got)
		}
	}
	var verdicts []string
	var med measurement
	for mi, m := range modes {
		ms := runs[mi]
		sort.Slice(ms, func(i, j int) bool { return ms[i].wall < ms[j].wall })
		md := ms[len(ms)/2]
		floor := time.Duration(md.calls) * latency
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f | %v (%v–%v) | %v | %.2f× |\n", m.name, md.turns, md.calls, md.largest,
			float64(md.turns)/float64(md.calls), md.wall.Round(time.Millisecond), ms[0].wall.Round(time.Millisecond),
			ms[len(ms)-1].wall.Round(time.Millisecond), floor, float64(md.wall)/float64(floor))
		verdicts = append(verdicts, fmt.Sprintf("%s: calls %d ≤ turns/20 = %d — %s; wall ÷ floor %.2f× ≤ 2 — %s", m.name, md.calls, md.turns/20,
			verdict(md.calls*20 <= md.turns), float64(md.wall)/float64(floor), verdict(float64(md.wall) <= 2*float64(floor))))
		if mi == 0 {
			med = md
		}
	}
	if serial {
		m, err := step(filepath.Join(dir, "serial.db"), ntasks, latency, 1, 1, tree.CommitInterval)
		if err != nil {
			return err
		}
		sf := time.Duration(m.calls) * latency
		fmt.Fprintf(&b, "| serial (one branch per call, 1 worker; 1 run) | %d | %d | %d | %.1f | %v | %v | %.2f× |\n", m.turns, m.calls, m.largest,
			float64(m.turns)/float64(m.calls), m.wall.Round(time.Millisecond), sf, float64(m.wall)/float64(sf))
		fmt.Fprintf(&b, "\nBatched (one commit per wave) is %.1f× faster than serial on the same step.\n", float64(m.wall)/float64(med.wall))
	}
	fmt.Fprintf(&b, "\nTargets (policy calls ≤ turns/20; wall within 2× of calls × latency):\n\n")
	for _, v := range verdicts {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	fmt.Print(b.String())
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
