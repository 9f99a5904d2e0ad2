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
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/internal/cputime"
	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// Result is one worker count's figures.
type Result struct {
	Workers         int     `json:"workers"`
	ServeTurnsPerS  float64 `json:"serve_turns_per_s"`
	InprocTurnsPerS float64 `json:"inproc_turns_per_s"`
	Ratio           float64 `json:"ratio"`
	Turns           int     `json:"turns"`
	Reps            int     `json:"reps"`
	ServeSubmits    int     `json:"serve_submits"`
	// SubmitsPerCommit is the median of the write requests the server
	// committed per transaction (patrdb_write_batch_requests).
	SubmitsPerCommit float64 `json:"submits_per_commit"`
	ServeLeaseBytes  int64   `json:"serve_lease_bytes,omitempty"`
	ServeSubmitBytes int64   `json:"serve_submit_bytes,omitempty"`
	// ServeCPU and InprocCPU are the medians of the process's CPU time
	// (user + system, both cores) while each contender ran: on a machine
	// shared with other work they move less than the wall times.
	ServeCPU  float64 `json:"serve_cpu_s,omitempty"`
	InprocCPU float64 `json:"inproc_cpu_s,omitempty"`
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
	fmt.Printf("| workers | over HTTP | in-process | ratio | turns | submits | submits per commit |\n|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %d | %.0f turns/s | %.0f turns/s | %.2f× | %d | %d | %.2f |\n", r.Workers, r.ServeTurnsPerS, r.InprocTurnsPerS, r.Ratio, r.Turns, r.ServeSubmits, r.SubmitsPerCommit)
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
	var serve, inproc, ratios, perCommit, serveCPU, inprocCPU []float64
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
		c0, _ := cputime.Process()
		start := time.Now()
		sr, err := e.Rollout(context.Background(), 1, llmfake.Tasks(tasks))
		took := time.Since(start)
		c1, _ := cputime.Process()
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
		c2, _ := cputime.Process()
		hr, err := overHTTP(db, workers, tasks)
		c3, _ := cputime.Process()
		db.Close()
		if err != nil {
			return res, err
		}
		if hr.turns != sr.EnvSteps {
			return res, fmt.Errorf("the workers stored %d turns, the engine %d: not the same work", hr.turns, sr.EnvSteps)
		}
		out := float64(hr.turns) / hr.took.Seconds()
		serve, inproc, ratios = append(serve, out), append(inproc, in), append(ratios, out/in)
		perCommit = append(perCommit, hr.perCommit)
		inprocCPU, serveCPU = append(inprocCPU, c1-c0), append(serveCPU, c3-c2)
		res.Turns, res.ServeSubmits = hr.turns, hr.submits
		res.ServeLeaseBytes, res.ServeSubmitBytes = hr.wire.leases.Load(), hr.wire.submits.Load()
	}
	res.ServeTurnsPerS, res.InprocTurnsPerS, res.Ratio = median(serve), median(inproc), median(ratios)
	res.SubmitsPerCommit = median(perCommit)
	res.ServeCPU, res.InprocCPU = median(serveCPU), median(inprocCPU)
	return res, nil
}

// httpRun is what one run over HTTP did.
type httpRun struct {
	turns, submits int
	took           time.Duration
	perCommit      float64 // submits the server's write batching committed per transaction
	wire           *wireBytes
}

// overHTTP grows the step through a server, workers client.Workers wide.
// The engine's Rollout also closes the step's groups, inside its time; the
// workers here leave that to a driver (a small share either way).
func overHTTP(db *store.DB, workers, tasks int) (run httpRun, err error) {
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		return run, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return run, err
	}
	run.wire = new(wireBytes)
	srv := &http.Server{Handler: run.wire.count(h)}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	ctx := context.Background()
	c := client.New(url)
	if _, err := c.OpenStep(ctx, "r", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: llmfake.Tasks(tasks)}); err != nil {
		return run, err
	}
	reqs0, commits0, err := batchCounts(url)
	if err != nil {
		return run, err
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
		run.turns += o.st.Turns
		run.submits += o.st.Submits
	}
	run.took = time.Since(start)
	if err != nil {
		return run, err
	}
	reqs, commits, err := batchCounts(url)
	if err != nil {
		return run, err
	}
	if commits > commits0 {
		run.perCommit = (reqs - reqs0) / (commits - commits0)
	}
	return run, nil
}

// wireBytes counts the bytes of lease answers and submit bodies.
type wireBytes struct{ leases, submits atomic.Int64 }

func (wb *wireBytes) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/submit"):
			wb.submits.Add(r.ContentLength)
		case strings.HasSuffix(r.URL.Path, "/leases"):
			w = &countingWriter{ResponseWriter: w, n: &wb.leases}
		}
		h.ServeHTTP(w, r)
	})
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n.Add(int64(len(b)))
	return c.ResponseWriter.Write(b)
}

// batchCounts reads the server's write-batch histogram: the requests
// committed and the commits so far.
func batchCounts(url string) (requests, commits float64, err error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, line := range strings.Split(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		var dst *float64
		switch name {
		case "patrdb_write_batch_requests_sum":
			dst = &requests
		case "patrdb_write_batch_requests_count":
			dst = &commits
		}
		if ok && dst != nil {
			if *dst, err = strconv.ParseFloat(v, 64); err != nil {
				return 0, 0, fmt.Errorf("/metrics: %q: %v", line, err)
			}
			found++
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/metrics has no patrdb_write_batch_requests")
	}
	return requests, commits, nil
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
