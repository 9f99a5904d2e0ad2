package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// The kill test: Go and Python worker processes grow one step over a
// `patrdb serve` child while workers and the server are killed with SIGKILL
// at random points (the server restarted on the same file and port). At the
// end the trees must equal an uninterrupted in-process run of the same
// agent, every acknowledged turn must be stored, no turn may have been
// written twice, and the file must check clean.
//
// PATRDB_KILLTEST=seconds runs the chaos longer (and on more tasks) than
// the bounded default.

// workerEnv names the environment variables that turn the test binary
// into a Go worker process (TestMain).
const (
	workerEnv = "PATRDB_TEST_WORKER" // "url run step name acks [slow] [defer]"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" {
		os.Exit(workerMain(spec))
	}
	os.Exit(m.Run())
}

// workerMain is a Go worker process of the fake agent; it logs every
// acknowledged submission to its acks file, as the Python example does.
func workerMain(spec string) int {
	f := strings.Fields(spec)
	step, _ := strconv.ParseUint(f[2], 10, 64)
	acks, err := os.OpenFile(f[4], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c := client.New(f[0])
	c.HTTP.Timeout = 10 * time.Second
	w := &client.Worker{Client: c, Run: f[1], Name: f[3], Policy: &fakePolicy{}, Env: fakeEnv{}, Scorer: fakeScorer{},
		Max: 3, TTL: 300 * time.Millisecond, Poll: 50 * time.Millisecond, // the Python worker's pace
		OnSubmit: func(req api.SubmitRequest, _ rollout.Submitted) {
			for _, s := range req.Submissions {
				writeAck(acks, s.Node, s.From, s.Turns)
			}
		}}
	for _, opt := range f[5:] {
		switch opt {
		case "slow": // tool calls of up to 2 s, under 300 ms leases: heartbeats carry them
			w.Env = slowTools{}
		case "defer": // rewards come from the test's verifier
			w.DeferRewards = true
		}
	}
	if _, err := w.Work(context.Background(), step); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// ack is one acknowledged submission as a worker logs it.
type ack struct {
	Node    uint64   `json:"node"`
	From    int      `json:"from"`
	Actions []string `json:"actions"`
}

func writeAck(f *os.File, node uint64, from int, turns []model.Turn) {
	a := ack{Node: node, From: from, Actions: []string{}}
	for _, t := range turns {
		a.Actions = append(a.Actions, t.Action)
	}
	b, _ := json.Marshal(a)
	f.Write(append(b, '\n'))
}

// proc is a child process the test may kill and restart.
type proc struct {
	name string
	cmd  func() *exec.Cmd
	p    *exec.Cmd
	done chan error
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	p.p = p.cmd()
	if err := p.p.Start(); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	done := make(chan error, 1)
	go func(c *exec.Cmd) { done <- c.Wait() }(p.p)
	p.done = done
}

// exited reports whether the process ended by itself, and how.
func (p *proc) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done = nil
		return true, err
	default:
		return p.done == nil, nil
	}
}

func (p *proc) kill() {
	if p.done == nil {
		return
	}
	_ = p.p.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.done = nil
}

// patrdbBin is $PATRDB_BIN or a patrdb built for the test.
func patrdbBin(t *testing.T) string {
	if b := os.Getenv("PATRDB_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "patrdb")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/patrdb/patrdb/cmd/patrdb").CombinedOutput()
	if err != nil {
		t.Skipf("cannot build patrdb: %v: %s", err, out)
	}
	return bin
}

// serveProc is `patrdb serve` on path at addr; start waits for its first line.
func serveProc(bin, path, addr string) *proc {
	return &proc{name: "serve", cmd: func() *exec.Cmd {
		return exec.Command(bin, "--db", path, "serve", "--addr", addr)
	}}
}

func startServe(t *testing.T, s *proc) {
	t.Helper()
	s.p = s.cmd()
	out, err := s.p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.p.Stderr = os.Stderr
	if err := s.p.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "serving ") {
		_ = s.p.Process.Kill()
		t.Fatalf("serve said %q: %v", line, err)
	}
	done := make(chan error, 1)
	go func(c *exec.Cmd) { done <- c.Wait() }(s.p)
	s.done = done
}

func TestKillWorkersAndServer(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test: not in -short")
	}
	// One round by default; PATRDB_KILLTEST=seconds repeats rounds of
	// twice the tasks (each on a fresh file) until the time is up.
	rounds, tasks, budget := 1, 24, time.Duration(0)
	if v := os.Getenv("PATRDB_KILLTEST"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 1 {
			t.Fatalf("PATRDB_KILLTEST=%q: want seconds", v)
		}
		rounds, tasks, budget = 1<<30, 48, time.Duration(secs)*time.Second
	}
	bin := patrdbBin(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	python, _ := exec.LookPath("python3")
	script, _ := filepath.Abs("../clients/python/examples/toy_worker.py")
	if _, err := os.Stat(script); err != nil {
		python = ""
	}
	if python == "" {
		t.Log("python3 not found: Go workers only")
	}
	start := time.Now()
	var total [2]int
	for r := 0; r < rounds && (r == 0 || time.Since(start) < budget); r++ {
		wk, sk := killRound(t, bin, self, python, script, tasks)
		total[0] += wk
		total[1] += sk
	}
	t.Logf("in all: %d worker kills, %d server kills in %v", total[0], total[1], time.Since(start).Round(time.Millisecond))
}

// killRound grows one step of tasks under chaos and checks it; it returns
// the worker and server kills.
func killRound(t *testing.T, bin, self, python, script string, tasks int) (workerKills, serverKills int) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kill.db")
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	url := "http://" + addr
	srv := serveProc(bin, path, addr)
	startServe(t, srv)
	defer srv.kill()

	c := client.New(url)
	c.Retries, c.Backoff = 20, 50*time.Millisecond
	const run = "kill"
	if _, err := c.CreateRun(bg, api.CreateRunRequest{Keyed: api.Keyed{ClientKey: "create"}, ID: run,
		Tree: json.RawMessage(`{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.1,"max_turns":8,"seed":5}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenStep(bg, run, api.OpenStepRequest{Keyed: api.Keyed{ClientKey: "open"}, Step: 1, Tasks: fakeTasks(tasks)}); err != nil {
		t.Fatal(err)
	}

	var workers []*proc
	var ackFiles []string
	for i := range 4 {
		acks := filepath.Join(dir, fmt.Sprintf("go-%d.acks", i))
		ackFiles = append(ackFiles, acks)
		// Half the Go workers leave their rewards to the verifier, the
		// other half have tool calls of up to 2 s now and then under
		// 300 ms leases: the Python side's two kinds crossed. When every
		// Go worker had slow tools, the two fast Python workers, started
		// first, once finished a step before any Go worker's submission
		// was acknowledged (chaos seed 2547998188899453244, under CI's
		// load), and checkAcks rightly failed.
		spec := fmt.Sprintf("%s %s 1 go-%d %s", url, run, i, acks)
		if i%2 == 0 {
			spec += " defer"
		} else {
			spec += " slow"
		}
		workers = append(workers, &proc{name: fmt.Sprint("go-", i), cmd: func() *exec.Cmd {
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), workerEnv+"="+spec)
			cmd.Stderr = os.Stderr
			return cmd
		}})
	}
	if python != "" {
		for i := range 4 {
			acks := filepath.Join(dir, fmt.Sprintf("py-%d.acks", i))
			ackFiles = append(ackFiles, acks)
			workers = append(workers, &proc{name: fmt.Sprint("py-", i), cmd: func() *exec.Cmd {
				args := []string{script, "--url", url, "--run", run, "--step", "1", "--name", fmt.Sprint("py-", i),
					"--max", "3", "--ttl-ms", "300", "--acks", acks}
				if i%2 == 1 { // tool calls of 0–2 s under 300 ms leases, rewards to the verifier
					args = append(args, "--slow-tool", "2", "--defer-rewards")
				}
				cmd := exec.Command(python, args...)
				cmd.Stderr = os.Stderr
				return cmd
			}})
		}
	}
	// Python workers start first: they take a while to import, and the Go
	// ones would have leased every root by then.
	for i := len(workers) - 1; i >= 0; i-- {
		workers[i].start(t)
		if i == 4 {
			waitForFile(t, ackFiles[4:], 10*time.Second)
		}
	}
	defer func() {
		for _, w := range workers {
			w.kill()
		}
	}()

	// A verifier in this process delivers the deferred rewards, over
	// HTTP, through the server's kills.
	vctx, stopVerifier := context.WithCancel(bg)
	defer stopVerifier()
	verified := make(chan error, 1)
	var vstats client.VerifyStats
	go func() {
		vc := client.New(url)
		vc.HTTP.Timeout = 10 * time.Second
		var err error
		vstats, err = (&client.Verifier{Client: vc, Run: run, Reward: pathReward, Poll: 20 * time.Millisecond}).Serve(vctx, 1)
		verified <- err
	}()

	// Chaos: kill a random worker (restarted at once) or the server
	// (restarted after a pause) every 20-150 ms, until the step is done or
	// the time is up.
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	seed := rng.Int63()
	rng = rand.New(rand.NewSource(seed))
	t.Logf("chaos seed %d", seed)
	// The first kill comes at once: on a fast, idle machine the workers can
	// finish the whole step within one pause.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		if workerKills+serverKills > 0 {
			time.Sleep(time.Duration(20+rng.Intn(130)) * time.Millisecond)
			if st, err := c.StepStatus(bg, run, 1); err == nil && st.Active == 0 {
				break
			}
		}
		if rng.Intn(4) == 0 {
			srv.kill()
			serverKills++
			time.Sleep(time.Duration(rng.Intn(200)) * time.Millisecond)
			startServe(t, srv)
			continue
		}
		w := workers[rng.Intn(len(workers))]
		if gone, err := w.exited(); gone {
			if err != nil {
				t.Fatalf("%s failed: %v", w.name, err)
			}
			continue
		}
		w.kill()
		workerKills++
		w.start(t)
	}
	// Calm: the workers finish the step.
	deadline := time.Now().Add(60 * time.Second)
	for _, w := range workers {
		if w.done == nil {
			continue
		}
		select {
		case err := <-w.done:
			w.done = nil
			if err != nil {
				t.Fatalf("%s failed: %v", w.name, err)
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%s did not finish", w.name)
		}
	}
	select {
	case err := <-verified:
		if err != nil {
			t.Fatalf("verifier: %v", err)
		}
	case <-time.After(time.Until(deadline)):
		t.Fatal("the verifier did not finish")
	}
	closeDone(t, c, run, 1)
	t.Logf("%d workers, %d tasks: %d worker kills, %d server kills, %d rewards deferred to the verifier", len(workers), tasks, workerKills, serverKills, vstats.Rewards)
	if workerKills+serverKills == 0 {
		t.Fatal("the step finished before anything was killed: give it more tasks")
	}

	sum, err := c.Run(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	var cfg runconfig.Config
	if err := json.Unmarshal(sum.Run.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := srv.p.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	srv.done = nil

	out, err := exec.Command(bin, "--db", path, "check").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("check: %v: %s", err, out)
	}
	db := storetest.OpenPath(t, path, storetest.Options())
	got := canonicalStep(t, db, run, 1)
	checkAcks(t, db, run, ackFiles)

	// The same step, uninterrupted, in process.
	ref := storetest.Open(t)
	createEmptyRun(t, ref, run)
	eng, err := tree.New(ref, run, tree.Options{Config: cfg.Tree, BatchPolicy: &fakePolicy{}, Env: fakeEnv{}, Scorer: fakeScorer{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Rollout(bg, 1, fakeTasks(tasks)); err != nil {
		t.Fatal(err)
	}
	want := canonicalStep(t, ref, run, 1)
	if got != want {
		t.Fatalf("the killed run's trees differ from the uninterrupted run's:\n%s", firstDiff(got, want))
	}
	return workerKills, serverKills
}

// waitForFile waits until one of files exists.
func waitForFile(t *testing.T, files []string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, f := range files {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 {
				return
			}
		}
	}
	t.Fatalf("none of %v appeared in %v", files, d)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// canonicalStep renders a step's trees with every node named by its place
// in the tree (task, then ordinals from the root), never by its id, which
// depends on timing.
func canonicalStep(t *testing.T, db *store.DB, run string, step uint64) string {
	t.Helper()
	type cnode struct {
		Status    model.NodeStatus
		Fork      int
		Base      int
		Attempt   int
		Reward    *float64
		Error     string
		Turns     []model.Turn
		Scores    []model.Score
		Decisions []model.Decision
		Adv       *model.Advantage
	}
	out := map[string]map[string]cnode{}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		groups, err := r.Groups(step)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if g.Status != model.GroupClosed {
				return fmt.Errorf("group %d is %s", g.ID, g.Status)
			}
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			place := map[uint64]string{}
			sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID }) // parents first
			advs, err := r.Advantages(step, g.ID)
			if err != nil {
				return err
			}
			byLeaf := map[uint64]model.Advantage{}
			for _, a := range advs {
				byLeaf[a.Leaf] = a
			}
			tr := map[string]cnode{}
			for _, n := range nodes {
				place[n.ID] = place[n.Parent] + fmt.Sprintf("/%d", n.Ordinal)
				turns, err := r.Turns(n.ID)
				if err != nil {
					return err
				}
				cn := cnode{Status: n.Status, Fork: n.Fork, Base: n.Base, Attempt: n.Attempt, Error: n.Error,
					Turns: turns, Scores: n.Scores, Decisions: n.Decisions}
				if n.HasReward {
					cn.Reward = ptr(n.Reward)
				}
				if a, ok := byLeaf[n.ID]; ok {
					a.Group, a.Leaf = 0, 0
					cn.Adv = &a
				}
				for i := range cn.Decisions {
					cn.Decisions[i].Children = 0 // counts are kept; ids are not compared
				}
				tr[place[n.ID]] = cn
			}
			out[g.Task] = tr
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			lo := max(i-8, 0)
			return fmt.Sprintf("line %d:\n got: %s\nwant: %s", i+1, strings.Join(al[lo:i+1], "\n      "), strings.Join(bl[lo:i+1], "\n      "))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}

// checkAcks requires every acknowledged turn in the store, and every
// stored turn written by exactly one turn event (no interval done twice).
func checkAcks(t *testing.T, db *store.DB, run string, files []string) {
	t.Helper()
	var acks []ack
	perFile := map[string]int{}
	defer func() {
		t.Logf("acknowledged submissions per worker: %v", perFile)
		goAcks, pyAcks := 0, 0
		for w, n := range perFile {
			if strings.HasPrefix(w, "go-") {
				goAcks += n
			} else {
				pyAcks += n
			}
		}
		if goAcks == 0 || (pyAcks == 0 && len(files) > 4) {
			t.Errorf("Go workers acknowledged %d submissions, Python workers %d: both should have grown the step", goAcks, pyAcks)
		}
	}()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			var a ack
			if json.Unmarshal([]byte(line), &a) == nil && a.Node != 0 {
				acks = append(acks, a) // a torn last line (killed while logging) is skipped
				perFile[strings.TrimSuffix(filepath.Base(f), ".acks")]++
			}
		}
	}
	if len(acks) == 0 {
		t.Fatal("no acknowledged submission was logged")
	}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		for _, a := range acks {
			turns, err := r.Turns(a.Node)
			if err != nil {
				return err
			}
			for i, act := range a.Actions {
				if a.From+i >= len(turns) || turns[a.From+i].Action != act {
					return fmt.Errorf("acknowledged turn %d of node %d (%q) is not stored", a.From+i, a.Node, act)
				}
			}
		}
		written := map[[2]uint64]int{}
		if err := r.Events(1, func(e model.Event) error {
			if e.Kind != model.EvTurns {
				return nil
			}
			var p model.TurnsPayload
			if err := store.DecodePayload(e, &p); err != nil {
				return err
			}
			for i := p.From; i < p.From+p.Count; i++ {
				written[[2]uint64{e.Node, uint64(i)}]++
			}
			return nil
		}); err != nil {
			return err
		}
		stored := 0
		for k, n := range written {
			if n != 1 {
				return fmt.Errorf("turn %d of node %d was written %d times", k[1], k[0], n)
			}
		}
		if err := r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			for _, n := range nodes {
				stored += n.Turns
			}
			return err
		}); err != nil {
			return err
		}
		if stored != len(written) {
			return fmt.Errorf("%d turns stored, %d written by turn events", stored, len(written))
		}
		t.Logf("%d acknowledged submissions checked; %d turns, each written once", len(acks), stored)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
