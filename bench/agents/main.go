// Command agents measures agent RL as it really runs — slow tool calls,
// dead workers, intervals longer than a lease — against the bounds the
// protocol promises, and prints one JSON object (-json) or a table:
//
//	go run ./bench/agents -json
//
// Figures, each a median of -reps repetitions measured side by side:
//
//   - dead_worker_recovery_s: a worker process holding branches (their
//     tools running) is SIGKILLed; seconds until another worker has leased
//     them all. Target ≤ 3 × heartbeat_s (its leases' renewal period).
//   - worker_env_ratio: one client.Worker over HTTP holding 64 branches
//     whose tool calls take 100 ms, against the in-process engine on the
//     same work with the same concurrency (64). Target ≤ 1.5.
//   - tail_ratio: the in-process engine on 32 tasks where 5 % of tool calls
//     take 1 s (the rest 50 ms), against the per-tree bound — for each
//     tree, the sum over its intervals of the slowest branch's tool and
//     policy time, the longest of the trees: what the step takes when each
//     tree waits only for its own branches. Target ≤ 1.25. The step-wide
//     barrier's time is printed beside it (tail_step_barrier_s).
//   - long_interval_committed: an interval whose tool call lasts 3 × the
//     lease TTL commits under the worker's heartbeats.
//
// The store is fsynced (the defaults); the server runs in this process on
// the loopback, the killed worker in a child process.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// workerEnv turns this binary into the worker process that is killed:
// "url run step ttl".
const workerEnv = "PATRDB_AGENTS_WORKER"

// Report is what the command prints.
type Report struct {
	DeadWorkerRecoveryS   float64 `json:"dead_worker_recovery_s"`
	HeartbeatS            float64 `json:"heartbeat_s"`
	LeaseTTLS             float64 `json:"lease_ttl_s"`
	DeadWorkerBranches    int     `json:"dead_worker_branches"`
	WorkerEnvRatio        float64 `json:"worker_env_ratio"`
	WorkerS               float64 `json:"worker_s"`
	EngineS               float64 `json:"engine_s"`
	TailRatio             float64 `json:"tail_ratio"`
	TailS                 float64 `json:"tail_s"`
	TailBoundS            float64 `json:"tail_bound_s"`
	TailStepBarrierS      float64 `json:"tail_step_barrier_s"`
	LongIntervalCommitted bool    `json:"long_interval_committed"`
	LongMeasured          bool    `json:"-"`
	Reps                  int     `json:"reps"`
}

func main() {
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(workerMain(spec))
	}
	asJSON := flag.Bool("json", false, "print one JSON object")
	reps := flag.Int("reps", 3, "repetitions of each timed figure (medians)")
	ttl := flag.Duration("ttl", 3*time.Second, "lease TTL of the dead-worker and long-interval measurements")
	dir := flag.String("dir", "", "work directory (default: a temporary one)")
	only := flag.String("only", "", "measure one figure: dead, worker, tail or long (default: all)")
	flag.Parse()
	if err := run(*asJSON, *reps, *ttl, *dir, *only); err != nil {
		fmt.Fprintln(os.Stderr, "agents:", err)
		os.Exit(1)
	}
}

func run(asJSON bool, reps int, ttl time.Duration, dir, only string) error {
	if reps < 1 {
		return fmt.Errorf("-reps %d: want at least 1", reps)
	}
	switch only {
	case "", "dead", "worker", "tail", "long":
	default:
		return fmt.Errorf("-only %q: want dead, worker, tail or long", only)
	}
	want := func(fig string) bool { return only == "" || only == fig }
	if dir == "" {
		d, err := os.MkdirTemp("", "patrdb-agents-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	rep := Report{Reps: reps, LeaseTTLS: ttl.Seconds(), HeartbeatS: rollout.HeartbeatEvery(ttl).Seconds()}
	var dead, worker, engine, tail, bound, stepBarrier []float64
	for i := range reps {
		sub := filepath.Join(dir, fmt.Sprint(i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		if want("worker") {
			w, e, err := envRatio(sub)
			if err != nil {
				return fmt.Errorf("worker vs engine: %w", err)
			}
			worker, engine = append(worker, w), append(engine, e)
		}
		if want("tail") {
			t, b, err := tailStep(sub, tree.BarrierGroup)
			if err != nil {
				return fmt.Errorf("tail: %w", err)
			}
			tail, bound = append(tail, t), append(bound, b)
			s, _, err := tailStep(sub, tree.BarrierStep)
			if err != nil {
				return fmt.Errorf("tail, step barrier: %w", err)
			}
			stepBarrier = append(stepBarrier, s)
		}
		if want("dead") {
			r, n, err := deadWorker(sub, ttl)
			if err != nil {
				return fmt.Errorf("dead worker: %w", err)
			}
			dead, rep.DeadWorkerBranches = append(dead, r), n
		}
	}
	if want("long") {
		ok, err := longInterval(dir, ttl)
		if err != nil {
			return fmt.Errorf("long interval: %w", err)
		}
		rep.LongIntervalCommitted, rep.LongMeasured = ok, true
	}
	rep.DeadWorkerRecoveryS = median(dead)
	rep.WorkerS, rep.EngineS = median(worker), median(engine)
	rep.WorkerEnvRatio = median(ratios(worker, engine))
	rep.TailS, rep.TailBoundS, rep.TailStepBarrierS = median(tail), median(bound), median(stepBarrier)
	rep.TailRatio = median(ratios(tail, bound))
	if asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}
	fmt.Print(table(rep))
	return nil
}

func table(r Report) string {
	var b strings.Builder
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Fprintf(&b, "| figure | median of %d | target | |\n|---|---|---|---|\n", r.Reps)
	if r.DeadWorkerBranches > 0 {
		fmt.Fprintf(&b, "| dead worker's %d branches leased again | %.2f s (heartbeat %.2f s, TTL %.1f s) | ≤ 3 heartbeats = %.2f s | %s |\n",
			r.DeadWorkerBranches, r.DeadWorkerRecoveryS, r.HeartbeatS, r.LeaseTTLS, 3*r.HeartbeatS, verdict(r.DeadWorkerRecoveryS <= 3*r.HeartbeatS))
	}
	if r.EngineS > 0 {
		fmt.Fprintf(&b, "| one HTTP worker ÷ in-process engine, 64 branches, 100 ms tools | %.2f× (%.2f s ÷ %.2f s) | ≤ 1.5× | %s |\n",
			r.WorkerEnvRatio, r.WorkerS, r.EngineS, verdict(r.WorkerEnvRatio <= 1.5))
	}
	if r.TailBoundS > 0 {
		fmt.Fprintf(&b, "| engine ÷ per-tree bound, 5 %% of tools 1 s | %.2f× (%.2f s ÷ %.2f s; step barrier %.2f s) | ≤ 1.25× | %s |\n",
			r.TailRatio, r.TailS, r.TailBoundS, r.TailStepBarrierS, verdict(r.TailRatio <= 1.25))
	}
	if r.LongMeasured {
		fmt.Fprintf(&b, "| interval of 3 × TTL committed under heartbeats | %t | true | %s |\n", r.LongIntervalCommitted, verdict(r.LongIntervalCommitted))
	}
	return b.String()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}

// newRun opens a fresh store in dir with one run of cfg.
func newRun(dir, name string, cfg tree.Config) (*store.DB, error) {
	db, err := store.Open(filepath.Join(dir, name+".db"), nil)
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(name, runconfig.Config{Tree: cfg}.JSON(), nil)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// serve serves db on the loopback until the returned stop is called.
func serve(db *store.DB) (string, func(), error) {
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// envRatio grows the same 64-branch step (16 tasks × B0 4, 100 ms tools)
// with the engine and with one HTTP worker, both 64 wide, and returns the
// worker's and the engine's wall times.
func envRatio(dir string) (workerS, engineS float64, err error) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns, cfg.MaxActive, cfg.Seed = 4, 5, 10, 4, 3
	tasks := llmfake.Tasks(16)
	env := &llmfake.Env{StepLatency: 100 * time.Millisecond}
	db, err := newRun(dir, "engine", cfg)
	if err != nil {
		return 0, 0, err
	}
	e, err := tree.New(db, "engine", tree.Options{Config: cfg, BatchPolicy: &llmfake.Policy{Version: 1}, Env: env,
		Scorer: llmfake.Scorer{}, Workers: 64})
	if err != nil {
		db.Close()
		return 0, 0, err
	}
	start := time.Now()
	_, err = e.Rollout(context.Background(), 1, tasks)
	engineS = time.Since(start).Seconds()
	db.Close()
	if err != nil {
		return 0, 0, err
	}

	db, err = newRun(dir, "worker", cfg)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	url, stop, err := serve(db)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	c := client.New(url)
	if _, err := c.OpenStep(context.Background(), "worker", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: tasks}); err != nil {
		return 0, 0, err
	}
	w := &client.Worker{Client: c, Run: "worker", Name: "w", Policy: &llmfake.Policy{Version: 1}, Env: env,
		Scorer: llmfake.Scorer{}, Max: 64, Workers: 64, PolicyVersion: 1}
	start = time.Now()
	if _, err := w.Work(context.Background(), 1); err != nil {
		return 0, 0, err
	}
	return time.Since(start).Seconds(), engineS, nil
}

// tailStep grows 32 trees where 5 % of the tool calls take 1 s (the others
// 50 ms; the policy answers a batch in 20 ms), and returns the step's wall
// time with the given barrier and the per-tree bound computed from the
// tools' recorded times.
func tailStep(dir string, barrier tree.Barrier) (stepS, boundS float64, err error) {
	const policyLatency = 20 * time.Millisecond
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 5, 20, 7
	var mu sync.Mutex
	took := map[[2]uint64]time.Duration{} // (node, path) → its tool's time
	env := &llmfake.Env{StepLatency: 50 * time.Millisecond, SlowChance: 0.05, SlowLatency: time.Second,
		OnStep: func(k rollout.TurnKey, d time.Duration) {
			mu.Lock()
			took[[2]uint64{k.Node, uint64(k.Path)}] = d
			mu.Unlock()
		}}
	name := fmt.Sprint("tail-", barrier)
	db, err := newRun(dir, name, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	e, err := tree.New(db, name, tree.Options{Config: cfg, BatchPolicy: &llmfake.Policy{Latency: policyLatency, Version: 1},
		Env: env, Scorer: llmfake.Scorer{}, Workers: 1024, Barrier: barrier})
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if _, err := e.Rollout(context.Background(), 1, llmfake.Tasks(32)); err != nil {
		return 0, 0, err
	}
	stepS = time.Since(start).Seconds()
	// The per-tree bound: each interval of a tree lasts as long as its
	// slowest branch's turns in it (tool plus one policy call each).
	var worst time.Duration
	err = db.ViewRun(name, func(r *store.RunTx) error {
		groups, err := r.Groups(1)
		if err != nil {
			return err
		}
		for _, g := range groups {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			per := map[int]map[uint64]time.Duration{} // interval → node → time
			for _, n := range nodes {
				for p := n.Base; p < n.PathLen(); p++ {
					iv := p / cfg.K
					if per[iv] == nil {
						per[iv] = map[uint64]time.Duration{}
					}
					per[iv][n.ID] += took[[2]uint64{n.ID, uint64(p)}] + policyLatency
				}
			}
			var tree time.Duration
			for _, byNode := range per {
				var slowest time.Duration
				for _, d := range byNode {
					slowest = max(slowest, d)
				}
				tree += slowest
			}
			worst = max(worst, tree)
		}
		return nil
	})
	return stepS, worst.Seconds(), err
}

// deadWorker starts a worker process that leases branches whose tools run
// for a minute, kills it with SIGKILL once it holds them, and returns the
// seconds until another worker has leased them all, and how many.
func deadWorker(dir string, ttl time.Duration) (float64, int, error) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 4, 5, 10
	db, err := newRun(dir, "dead", cfg)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	url, stop, err := serve(db)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	ctx := context.Background()
	c := client.New(url)
	if _, err := c.OpenStep(ctx, "dead", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: llmfake.Tasks(4)}); err != nil {
		return 0, 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s dead 1 %d", workerEnv, url, ttl.Milliseconds()))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer cmd.Process.Kill()
	want := 4 * cfg.B0
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.StepStatus(ctx, "dead", 1)
		if err != nil {
			return 0, 0, err
		}
		if st.Leased == want {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("the worker holds %d of %d branches after 30 s", st.Leased, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Let it live through a couple of heartbeats, as a worker in a long
	// tool call does, then kill it.
	time.Sleep(2 * rollout.HeartbeatEvery(ttl))
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, 0, err
	}
	killed := time.Now()
	_ = cmd.Wait()
	got := 0
	for got < want {
		ls, err := c.Lease(ctx, "dead", api.LeaseRequest{Worker: "rescuer", Step: 1, TTLMs: time.Hour.Milliseconds(), History: new(bool)})
		if err != nil {
			return 0, 0, err
		}
		got += len(ls)
		if time.Since(killed) > time.Minute {
			return 0, 0, fmt.Errorf("%d of %d branches leased again after a minute", got, want)
		}
		if got < want {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return time.Since(killed).Seconds(), want, nil
}

// workerMain is the worker process deadWorker kills: its tools take a
// minute, so it holds its leases, renewing them, until it dies.
func workerMain(spec string) int {
	f := strings.Fields(spec)
	step, _ := strconv.ParseUint(f[2], 10, 64)
	ttlMs, _ := strconv.ParseInt(f[3], 10, 64)
	w := &client.Worker{Client: client.New(f[0]), Run: f[1], Name: "doomed", Policy: &llmfake.Policy{Version: 1},
		Env: &llmfake.Env{StepLatency: time.Minute}, Scorer: llmfake.Scorer{}, Max: 64, TTL: time.Duration(ttlMs) * time.Millisecond}
	if _, err := w.Work(context.Background(), step); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// longInterval grows one branch whose first tool call lasts 3 × the lease
// TTL, under a worker's heartbeats, and reports whether its interval
// committed with no work lost.
func longInterval(dir string, ttl time.Duration) (bool, error) {
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 1, 2, 2
	db, err := newRun(dir, "long", cfg)
	if err != nil {
		return false, err
	}
	defer db.Close()
	url, stop, err := serve(db)
	if err != nil {
		return false, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*ttl)
	defer cancel()
	c := client.New(url)
	if _, err := c.OpenStep(ctx, "long", api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: llmfake.Tasks(1)}); err != nil {
		return false, err
	}
	w := &client.Worker{Client: c, Run: "long", Name: "slow", Policy: &llmfake.Policy{Version: 1},
		Env: &llmfake.Env{StepLatency: 3 * ttl / 2}, Scorer: llmfake.Scorer{}, TTL: ttl} // two steps: 3 × TTL
	st, err := w.Work(ctx, 1)
	if err != nil {
		return false, err
	}
	return st.Turns == 2 && st.Lost == 0, nil
}
