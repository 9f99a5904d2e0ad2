package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// Config bounds one load test.
type Config struct {
	Clients    int
	Turns      int           // per client
	Duration   time.Duration // per phase: no request starts after it
	Batch      int           // turns per request
	Tokens     int           // action tokens per turn
	RetryEvery int           // every n-th request is sent twice (0: never)
	NoSync     bool
	Rounds     int // alternate the two phases this many times; figures are medians
}

func defaultConfig() Config {
	return Config{Clients: 8, Turns: 200, Duration: 20 * time.Second, Batch: 1, Tokens: 300, RetryEvery: 10, Rounds: 3}
}

// Phase is what one side (in-process or HTTP) achieved.
type Phase struct {
	Name      string
	Requests  int
	Turns     int
	Elapsed   time.Duration
	PerSecond float64 // turns per second
	P50, P99  time.Duration
}

// Report is the outcome of Run.
type Report struct {
	Config     Config
	InProcess  Phase
	HTTP       Phase
	Ratio      float64 // median over rounds of HTTP throughput / in-process throughput
	Retries    int     // requests sent a second time with the same key
	Replayed   int     // of those, answered from the reply log
	Lost       int     // acknowledged turns missing from the file
	Duplicated int     // turn-write events beyond one per acknowledged request
}

// Print writes the figures.
func (r Report) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "patrdb serve load test: %d clients × %d turns (%d per request, %d action tokens), bound %v per phase, fsync %v, median of %d rounds\n",
		c.Clients, c.Turns, c.Batch, c.Tokens, c.Duration, !c.NoSync, c.Rounds)
	for _, p := range []Phase{r.InProcess, r.HTTP} {
		fmt.Fprintf(w, "  %-10s %6d requests %7d turns in %8v  %9.0f turns/s  p50 %8v  p99 %8v\n",
			p.Name, p.Requests, p.Turns, p.Elapsed.Round(time.Millisecond), p.PerSecond, p.P50.Round(time.Microsecond), p.P99.Round(time.Microsecond))
	}
	fmt.Fprintf(w, "  throughput HTTP / in-process: %.2f\n", r.Ratio)
	fmt.Fprintf(w, "  retries sent twice: %d, answered from the reply log: %d\n", r.Retries, r.Replayed)
	fmt.Fprintf(w, "  lost writes: %d, duplicated writes: %d\n", r.Lost, r.Duplicated)
}

// Run measures both phases, alternating them Rounds times (each on its own
// fresh file under dir) so a noisy machine hits both alike, and reports the
// median round of each and the median ratio. The audit counts cover every
// round.
func Run(cfg Config, dir string) (Report, error) {
	rep := Report{Config: cfg}
	if cfg.Clients < 1 || cfg.Turns < 1 || cfg.Batch < 1 || cfg.Duration <= 0 || cfg.Rounds < 1 {
		return rep, fmt.Errorf("clients, turns, batch, duration and rounds must be positive")
	}
	if cfg.Turns > tree.MaxK {
		return rep, fmt.Errorf("turns %d: at most %d (one branch's interval)", cfg.Turns, tree.MaxK)
	}
	var ins, hts []Phase
	var ratios []float64
	for i := 0; i < cfg.Rounds; i++ {
		in, err := inProcess(cfg, filepath.Join(dir, fmt.Sprintf("inproc-%d.db", i)))
		if err != nil {
			return rep, fmt.Errorf("in-process: %w", err)
		}
		if err := overHTTP(cfg, filepath.Join(dir, fmt.Sprintf("http-%d.db", i)), &rep); err != nil {
			return rep, fmt.Errorf("http: %w", err)
		}
		ins, hts = append(ins, in), append(hts, rep.HTTP)
		if in.PerSecond > 0 {
			ratios = append(ratios, rep.HTTP.PerSecond/in.PerSecond)
		}
	}
	rep.InProcess, rep.HTTP = medianPhase(ins), medianPhase(hts)
	if len(ratios) > 0 {
		sort.Float64s(ratios)
		rep.Ratio = ratios[len(ratios)/2]
	}
	return rep, nil
}

// medianPhase is the round with the median throughput.
func medianPhase(ps []Phase) Phase {
	s := append([]Phase(nil), ps...)
	sort.Slice(s, func(i, j int) bool { return s[i].PerSecond < s[j].PerSecond })
	return s[len(s)/2]
}

func openStore(path string, nosync bool) (*store.DB, error) {
	o := store.DefaultOptions()
	o.NoSync = nosync
	return store.Open(path, o)
}

// setup creates a run with one open group and one root branch per client.
func setup(db *store.DB, clients int) ([]uint64, error) {
	var nodes []uint64
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("load", []byte(`{"tree":{"b0":1,"k":1000,"m":2,"top_expand":2,"delta":0.5,"prune_rule":"max","repeat_prune":0,"max_turns":0,"max_active":0,"seed":0,"no_scoring":false}}`), nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "load"})
		if err != nil {
			return err
		}
		for i := 0; i < clients; i++ {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			nodes = append(nodes, n.ID)
		}
		return nil
	})
	return nodes, err
}

// makeTurns builds the batch a client writes at own-turn index from.
func makeTurns(cfg Config, client, from int) []model.Turn {
	out := make([]model.Turn, cfg.Batch)
	for i := range out {
		idx := from + i
		act := make([]uint32, cfg.Tokens)
		lp := make([]float32, cfg.Tokens)
		obs := make([]uint32, 4*cfg.Tokens)
		for j := range act {
			act[j] = uint32(client*1_000_003 + idx*131 + j)
			lp[j] = -float32(j%17) / 8
		}
		for j := range obs {
			obs[j] = uint32(idx*7 + j)
		}
		out[i] = model.Turn{Action: fmt.Sprintf("client %d turn %d", client, idx), ActionTokens: act, ActionLogprobs: lp,
			Observation: fmt.Sprintf("observation %d/%d", client, idx), ObservationTokens: obs, Reward: float64(idx % 2)}
	}
	return out
}

// drive runs one worker per client until each wrote cfg.Turns turns or the
// deadline passed, and returns the latencies and turns written.
func drive(cfg Config, name string, do func(client, from int, turns []model.Turn, retry bool) (time.Duration, error)) (Phase, []int, error) {
	deadline := time.Now().Add(cfg.Duration)
	lat := make([][]time.Duration, cfg.Clients)
	written := make([]int, cfg.Clients)
	errs := make([]error, cfg.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < cfg.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := 0; written[c] < cfg.Turns && time.Now().Before(deadline); req++ {
				turns := makeTurns(cfg, c, written[c])
				if rest := cfg.Turns - written[c]; len(turns) > rest {
					turns = turns[:rest]
				}
				retry := cfg.RetryEvery > 0 && req%cfg.RetryEvery == cfg.RetryEvery-1
				d, err := do(c, written[c], turns, retry)
				if err != nil {
					errs[c] = err
					return
				}
				lat[c] = append(lat[c], d)
				written[c] += len(turns)
			}
		}()
	}
	wg.Wait()
	p := Phase{Name: name, Elapsed: time.Since(start)}
	var all []time.Duration
	for c := range lat {
		all = append(all, lat[c]...)
		p.Turns += written[c]
	}
	p.Requests = len(all)
	if err := errors.Join(errs...); err != nil {
		return p, written, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		p.P50 = all[len(all)/2]
		p.P99 = all[min(len(all)-1, len(all)*99/100)]
	}
	p.PerSecond = float64(p.Turns) / p.Elapsed.Seconds()
	return p, written, nil
}

// inProcess is the anchor: the same appends, one transaction each, through
// the store's own API in this process.
func inProcess(cfg Config, path string) (Phase, error) {
	db, err := openStore(path, cfg.NoSync)
	if err != nil {
		return Phase{}, err
	}
	defer db.Close()
	nodes, err := setup(db, cfg.Clients)
	if err != nil {
		return Phase{}, err
	}
	p, _, err := drive(cfg, "in-process", func(c, from int, turns []model.Turn, _ bool) (time.Duration, error) {
		t0 := time.Now()
		err := db.UpdateRun("load", func(r *store.RunTx) error {
			return r.AppendTurns(nodes[c], from, turns...)
		})
		return time.Since(t0), err
	})
	return p, err
}

// overHTTP serves a fresh file on a loopback port and appends through the
// API with one keep-alive client per worker, then audits the file.
func overHTTP(cfg Config, path string, rep *Report) error {
	db, err := openStore(path, cfg.NoSync)
	if err != nil {
		return err
	}
	defer db.Close()
	nodes, err := setup(db, cfg.Clients)
	if err != nil {
		return err
	}
	h, err := server.NewHandler(db, server.Options{})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := server.NewHTTPServer(ln.Addr().String(), h)
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	base := "http://" + ln.Addr().String()
	clients := make([]*client.Client, cfg.Clients)
	for i := range clients {
		clients[i] = client.New(base)
		clients[i].HTTP = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	}
	var mu sync.Mutex
	ctx := context.Background()
	// Each client leases its own branch (one interval of up to 1,000 turns)
	// and submits its turns under that lease, a batch at a time.
	leases := make([]string, cfg.Clients)
	for c := range leases {
		ls, err := clients[c].Lease(ctx, "load", api.LeaseRequest{Worker: fmt.Sprint("client-", c), Max: 1, Step: 1})
		if err != nil {
			return err
		}
		if len(ls) != 1 || ls[0].Node != nodes[c] {
			return fmt.Errorf("loadtest: client %d leased %+v, want node %d", c, ls, nodes[c])
		}
		leases[c] = ls[0].ID
	}
	p, written, err := drive(cfg, "http", func(c, from int, turns []model.Turn, retry bool) (time.Duration, error) {
		key := fmt.Sprintf("load/%d/%d", c, from)
		req := api.SubmitRequest{Keyed: api.Keyed{ClientKey: key},
			Submissions: []rollout.Submission{{Lease: leases[c], Worker: fmt.Sprint("client-", c), Node: nodes[c], From: from, Turns: turns}}}
		t0 := time.Now()
		first, err := clients[c].Submit(ctx, "load", req)
		d := time.Since(t0)
		if err != nil {
			return d, err
		}
		if retry {
			// The answer was "lost": the client sends the same request again.
			again, err := clients[c].Submit(ctx, "load", req)
			if err != nil {
				return d, err
			}
			mu.Lock()
			rep.Retries++
			if reflect.DeepEqual(again, first) {
				rep.Replayed++
			}
			mu.Unlock()
		}
		return d, nil
	})
	rep.HTTP = p
	if err != nil {
		return err
	}
	return audit(db, cfg, nodes, written, p.Requests, rep)
}

// audit reads every node back: each acknowledged turn is there, byte for
// byte, and the log holds exactly one turn-write event per acknowledged
// request (a retry that wrote again would add one).
func audit(db *store.DB, cfg Config, nodes []uint64, written []int, requests int, rep *Report) error {
	return db.ViewRun("load", func(r *store.RunTx) error {
		var err error
		for c, id := range nodes {
			n, err := r.Node(id)
			if err != nil {
				return err
			}
			turns, err := r.Turns(id)
			if err != nil {
				return err
			}
			if n.Turns != written[c] {
				rep.Lost += max(written[c]-n.Turns, 0)
				rep.Duplicated += max(n.Turns-written[c], 0)
			}
			for from := 0; from < written[c]; from += cfg.Batch {
				want := makeTurns(cfg, c, from)
				for i, w := range want {
					idx := from + i
					if idx >= written[c] {
						break
					}
					if idx >= len(turns) || turns[idx].Action != w.Action || len(turns[idx].ActionTokens) != len(w.ActionTokens) ||
						turns[idx].ActionTokens[len(w.ActionTokens)-1] != w.ActionTokens[len(w.ActionTokens)-1] {
						rep.Lost++
					}
				}
			}
		}
		events := 0
		err = r.Events(1, func(e model.Event) error {
			if e.Kind == model.EvTurns {
				events++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if events > requests {
			rep.Duplicated += events - requests
		}
		if events < requests {
			rep.Lost += requests - events
		}
		return nil
	})
}
