// Command agentworker is agent RL as it really runs, to copy: workers that
// call slow tools, a verifier in another process that scores the finished
// episodes later, and a driver that publishes new weights every step —
// all over patrdb serve's HTTP API. Here they are goroutines of one
// process against a server it starts on the loopback; in a real setup each
// worker and the verifier is its own process (many machines), pointed at
// `patrdb serve` with -url.
//
//	go run ./examples/agentworker -db /tmp/agent.db -steps 2
//	go run ./examples/agentworker -url http://127.0.0.1:7070 -steps 2   # against a running patrdb serve
//
// What it shows: leases of a short TTL (-ttl) kept alive by the workers'
// heartbeats through tool calls longer than the TTL (-slow); the reward of
// each finished branch deferred to the verifier (reward_pending) and
// delivered late; the run's policy version published after each step, with
// max_staleness refusing workers whose weights fall too far behind.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/internal/llmfake"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agentworker:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("agentworker", flag.ContinueOnError)
	path := fs.String("db", "agent.db", "store file to serve (ignored with -url)")
	url := fs.String("url", "", "a running patrdb serve (default: serve -db in this process)")
	runID := fs.String("run", "agent-1", "run id")
	steps := fs.Int("steps", 2, "steps to train")
	ntasks := fs.Int("tasks", 4, "tasks per step")
	workers := fs.Int("workers", 2, "rollout workers")
	ttl := fs.Duration("ttl", 2*time.Second, "lease TTL (workers renew every 0.4 × TTL)")
	slow := fs.Duration("slow", 3*time.Second, "how long the slow tool calls take")
	verifyAfter := fs.Duration("verify-after", time.Second, "how long the verifier takes per reward")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	base := *url
	if base == "" {
		db, err := store.Open(*path, nil)
		if err != nil {
			return err
		}
		defer db.Close()
		h, err := server.NewHandler(db, server.Options{})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h}
		go srv.Serve(ln)
		defer srv.Close()
		base = "http://" + ln.Addr().String()
	}
	c := client.New(base)

	// The run: PaTR trees whose workers' weights may lag one version.
	tree, _ := json.Marshal(map[string]any{"b0": 2, "k": 3, "m": 2, "top_expand": 1, "max_turns": 6, "max_staleness": 1})
	_, err := c.CreateRun(ctx, api.CreateRunRequest{Keyed: api.Keyed{ClientKey: "create-" + *runID}, ID: *runID, Tree: tree})
	if err != nil && !errors.Is(err, api.ErrConflict) { // already there: resume it
		return err
	}
	info, err := c.Run(ctx, *runID)
	if err != nil {
		return err
	}
	for step := info.Run.LastStep + 1; step <= uint64(*steps); step++ {
		if err := trainStep(ctx, c, *runID, step, *ntasks, *workers, *ttl, *slow, *verifyAfter, out); err != nil {
			return err
		}
	}
	return nil
}

// slowTool is the agent's environment: llmfake's SWE-style episodes, one
// tool call in five taking slow (a test suite), and every episode's
// outcome left to the verifier.
func slowTool(slow time.Duration) *llmfake.Env {
	return &llmfake.Env{StepLatency: 10 * time.Millisecond, SlowChance: 0.2, SlowLatency: slow}
}

func trainStep(ctx context.Context, c *client.Client, run string, step uint64, ntasks, nworkers int, ttl, slow, verifyAfter time.Duration, out io.Writer) error {
	start := time.Now()
	key := fmt.Sprintf("%s/%d", run, step)
	if _, err := c.OpenStep(ctx, run, api.OpenStepRequest{Keyed: api.Keyed{ClientKey: key + "/open"}, Step: step, Tasks: llmfake.Tasks(ntasks)}); err != nil {
		return err
	}
	version := step // the weights after step-1 updates, published below
	var wg sync.WaitGroup
	errs := make(chan error, nworkers+1)
	stats := make([]client.WorkStats, nworkers)
	for i := range nworkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &client.Worker{Client: c, Run: run, Name: fmt.Sprintf("worker-%d", i), Policy: &llmfake.Policy{Version: version},
				Env: slowTool(slow), Scorer: llmfake.Scorer{}, Max: 8, TTL: ttl, PolicyVersion: version, DeferRewards: true}
			var err error
			stats[i], err = w.Work(ctx, step)
			errs <- err
		}()
	}
	// The verifier: in a real setup a test suite or a remote reward model
	// in its own process, reading each finished trajectory.
	var vs client.VerifyStats
	wg.Add(1)
	go func() {
		defer wg.Done()
		v := &client.Verifier{Client: c, Run: run, Reward: func(ctx context.Context, _ rollout.Task, path []model.Turn) (float64, error) {
			select {
			case <-time.After(verifyAfter):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			sum := 0.0
			for _, t := range path {
				sum += t.Reward
			}
			return sum, nil
		}}
		var err error
		vs, err = v.Serve(ctx, step)
		errs <- err
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	// Close the groups (GRPO), train, publish the new weights, checkpoint.
	st, err := c.StepStatus(ctx, run, step)
	if err != nil {
		return err
	}
	for _, g := range st.Done {
		if _, err := c.CloseGroup(ctx, run, g, api.CloseGroupRequest{Keyed: api.Keyed{ClientKey: fmt.Sprintf("%s/close/%d", key, g)}}); err != nil {
			return err
		}
	}
	// ... your optimizer step on GET .../steps/{step}/batch ...
	if _, err := c.Publish(ctx, run, api.PublishRequest{Keyed: api.Keyed{ClientKey: key + "/publish"}, Version: version + 1}); err != nil {
		return err
	}
	if _, err := c.PutCheckpoint(ctx, run, api.CheckpointRequest{Keyed: api.Keyed{ClientKey: key + "/ckpt"}, Step: step,
		URI: fmt.Sprintf("file:///ckpt/%s/%d", run, step)}); err != nil {
		return err
	}
	turns, lost := 0, 0
	for _, s := range stats {
		turns, lost = turns+s.Turns, lost+s.Lost
	}
	fmt.Fprintf(out, "step %d: %d groups closed, %d turns by %d workers (%d lost), %d rewards from the verifier, version %d published, %s\n",
		step, len(st.Done), turns, nworkers, lost, vs.Rewards, version+1, time.Since(start).Round(time.Millisecond))
	return nil
}
