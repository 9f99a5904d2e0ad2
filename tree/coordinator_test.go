package tree_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// The protocol as a worker sees it: leases, submits and every refusal.

// clock is a settable time source for lease expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func coordinator(t *testing.T, db *store.DB, run string, cfg tree.Config, o *tree.CoordinatorOptions) *tree.Coordinator {
	t.Helper()
	newRun(t, db, run, cfg)
	c, err := tree.NewCoordinator(db, run, &cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func lease(t *testing.T, c *tree.Coordinator, req tree.LeaseRequest) []rollout.Lease {
	t.Helper()
	ls, err := c.Lease(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func submit(c *tree.Coordinator, subs ...rollout.Submission) (*rollout.Submitted, error) {
	var out *rollout.Submitted
	err := c.DB().Update(func(tx *store.Tx) (err error) {
		out, err = c.Submit(tx, subs)
		return err
	})
	return out, err
}

func openStep(t *testing.T, c *tree.Coordinator, step uint64, ts []rollout.Task) []model.Group {
	t.Helper()
	var gs []model.Group
	if err := c.DB().Update(func(tx *store.Tx) (err error) {
		gs, err = c.OpenStep(tx, step, ts)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return gs
}

func turnsN(prefix string, n int) []model.Turn {
	out := make([]model.Turn, n)
	for i := range out {
		out[i] = model.Turn{Action: fmt.Sprintf("%s%d", prefix, i), ActionTokens: []uint32{uint32(i)}, ActionLogprobs: []float32{-0.5},
			Observation: "o", ObservationTokens: []uint32{7}}
	}
	return out
}

func ptr(x float64) *float64 { return &x }

// TestSubmitRefusals: every submit that does not fit the branch's state is
// refused with its typed error and writes nothing; the same branch then
// takes the right submit.
func TestSubmitRefusals(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = 2, 3, 7
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := coordinator(t, db, "r", cfg, &tree.CoordinatorOptions{LeaseTTL: time.Minute, Now: clk.now})
	openStep(t, c, 1, tasks(1))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w1"})
	if len(ls) != 2 || ls[0].Turns != 3 || !ls[0].Score || ls[0].From != 0 || ls[0].Interval != 0 {
		t.Fatalf("leases %+v", ls)
	}
	if again := lease(t, c, tree.LeaseRequest{Worker: "w2"}); len(again) != 0 {
		t.Fatalf("held branches leased again: %+v", again)
	}
	a, b := ls[0], ls[1]
	before := dumpRun(t, db, "r")
	refuse := func(name string, want error, subs ...rollout.Submission) {
		t.Helper()
		if _, err := submit(c, subs...); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
		if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
			t.Fatalf("%s: a refused submit wrote: %s", name, d)
		}
	}
	refuse("unknown lease", rollout.ErrLeaseLost, rollout.Submission{Lease: "nope", Node: a.Node, Turns: turnsN("a", 3), Score: ptr(0.5)})
	refuse("another branch's lease", rollout.ErrLeaseLost, rollout.Submission{Lease: b.ID, Worker: b.Worker, Node: a.Node, Turns: turnsN("a", 1)})
	refuse("gap after the stored turns", rollout.ErrLeaseLost, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, From: 1, Turns: turnsN("a", 1)})
	refuse("score before K turns", rollout.ErrTooEarly, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 2), Score: ptr(0.5)})
	refuse("more than K turns", rollout.ErrConflict, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 4)})
	refuse("score outside [0,1]", model.ErrInvalid, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 3), Score: ptr(1.5)})
	ended := turnsN("a", 2)
	ended[1].Done = true
	refuse("score of a branch that ends", rollout.ErrConflict, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: ended, Score: ptr(0.5)})
	refuse("reward of a branch that goes on", model.ErrInvalid, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 1), Reward: ptr(1)})
	doneMid := turnsN("a", 3)
	doneMid[0].Done = true
	refuse("turns after a done turn", model.ErrInvalid, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: doneMid})
	bad := turnsN("a", 1)
	bad[0].ActionLogprobs = []float32{-1, -2}
	refuse("logprobs not one per token", model.ErrInvalid, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: bad})
	bad = turnsN("a", 1)
	bad[0].Observation = "\xff"
	refuse("invalid UTF-8", model.ErrInvalid, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: bad})
	refuse("a failure with turns", model.ErrInvalid, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 1), Error: "boom"})
	// One bad submission refuses the whole call, the good one included.
	refuse("a good and a bad submission", rollout.ErrTooEarly,
		rollout.Submission{Lease: b.ID, Worker: b.Worker, Node: b.Node, Turns: turnsN("b", 3), Score: ptr(0.9)},
		rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 1), Score: ptr(0.5)})

	// In parts: two turns, then the third with the score.
	if _, err := submit(c, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, Turns: turnsN("a", 2)}); err != nil {
		t.Fatal(err)
	}
	refuse2 := func(name string, want error, s rollout.Submission) {
		t.Helper()
		if _, err := submit(c, s); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	refuse2("the same turns again (stale from)", rollout.ErrLeaseLost, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, From: 0, Turns: turnsN("a", 2)})
	if _, err := submit(c, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, From: 2, Turns: turnsN("x", 1), Score: ptr(0.25)}); err != nil {
		t.Fatal(err)
	}
	refuse2("a second score", rollout.ErrConflict, rollout.Submission{Lease: a.ID, Worker: a.Worker, Node: a.Node, From: 3, Score: ptr(0.5)})

	// b's lease expires and w2 takes it; w1's late submit is refused.
	clk.add(2 * time.Minute)
	ls2 := lease(t, c, tree.LeaseRequest{Worker: "w2"})
	if len(ls2) != 1 || ls2[0].Node != b.Node || ls2[0].ID == b.ID {
		t.Fatalf("expired lease not handed on: %+v", ls2)
	}
	refuse2("an expired lease handed on", rollout.ErrLeaseLost, rollout.Submission{Lease: b.ID, Worker: b.Worker, Node: b.Node, Turns: turnsN("b", 3), Score: ptr(0.9)})
	sub, err := submit(c, rollout.Submission{Lease: ls2[0].ID, Worker: ls2[0].Worker, Node: b.Node, Turns: turnsN("b", 3), Score: ptr(0.9)})
	if err != nil {
		t.Fatal(err)
	}
	// Both branches scored: the group is routed (b expands, a is 0.65 below).
	if len(sub.Routed) != 1 || len(sub.Routed[0].Decisions) != 2 || len(sub.Routed[0].Active) != 2 {
		t.Fatalf("routing %+v", sub.Routed)
	}
	refuse2("a lease whose interval is over", rollout.ErrBranchEnded, rollout.Submission{Lease: ls2[0].ID, Worker: ls2[0].Worker, Node: b.Node, From: 3, Turns: turnsN("b", 1)})
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestOpenStepIdempotent: a second driver opening the same step with the
// same tasks gets the same groups; other tasks are refused; a completed
// step is refused.
func TestOpenStepIdempotent(t *testing.T) {
	db := storetest.Open(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	first := openStep(t, c, 1, tasks(3))
	second := openStep(t, c, 1, tasks(3))
	if !reflect.DeepEqual(first, second) || len(first) != 3 {
		t.Fatalf("second open: %+v, first %+v", second, first)
	}
	status := func() rollout.StepStatus {
		var st rollout.StepStatus
		if err := db.View(func(tx *store.Tx) (err error) { st, err = c.Status(tx, 1); return err }); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st.Groups != 3 || st.Open != 3 || st.Active != 3*tree.DefaultConfig().B0 || len(st.Done) != 0 || st.Leased != 0 {
		t.Errorf("status of a fresh step: %+v", st)
	}
	err := db.Update(func(tx *store.Tx) error { _, err := c.OpenStep(tx, 1, tasks(2)); return err })
	if !errors.Is(err, rollout.ErrStepExists) {
		t.Errorf("other tasks: %v, want ErrStepExists", err)
	}
	// Abandoning the step is on record, and lets a checkpoint complete it.
	if err := db.Update(func(tx *store.Tx) error {
		r, _ := tx.Run("r")
		return r.PutCheckpoint(model.Checkpoint{Step: 1, URI: "file:///w1"})
	}); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("checkpoint over open groups: %v, want ErrInvalid", err)
	}
	if err := db.Update(func(tx *store.Tx) error {
		if err := c.Abandon(tx, 1, "policy diverged"); err != nil {
			return err
		}
		r, _ := tx.Run("r")
		return r.PutCheckpoint(model.Checkpoint{Step: 1, URI: "file:///w1"})
	}); err != nil {
		t.Fatal(err)
	}
	if st := status(); st.Open != 0 || st.Closed != 3 || st.Active != 0 {
		t.Errorf("status of an abandoned step: %+v", st)
	}
	got := dumpRun(t, db, "r")
	for _, n := range got.Nodes {
		if n.Status != model.NodeFailed || n.Error != "abandoned: policy diverged" {
			t.Errorf("node %d after abandon: %s %q", n.ID, n.Status, n.Error)
		}
	}
	err = db.Update(func(tx *store.Tx) error { _, err := c.OpenStep(tx, 1, tasks(3)); return err })
	if !errors.Is(err, rollout.ErrConflict) {
		t.Errorf("opening a completed step: %v, want ErrConflict", err)
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// TestConfigBounds: configs past the documented bounds are refused before
// anything is written, naming the field.
func TestConfigBounds(t *testing.T) {
	for name, mut := range map[string]func(*tree.Config){
		"B0":        func(c *tree.Config) { c.B0 = tree.MaxB0 + 1 },
		"M":         func(c *tree.Config) { c.M = tree.MaxM + 1 },
		"K":         func(c *tree.Config) { c.K = tree.MaxK + 1 },
		"TopExpand": func(c *tree.Config) { c.TopExpand = tree.MaxWidth + 1 },
		"MaxActive": func(c *tree.Config) { c.MaxActive = tree.MaxWidth + 1 },
		"MaxTurns":  func(c *tree.Config) { c.MaxTurns = tree.MaxTurnCap + 1 },
		// Each factor within its bound, their product past MaxChildren.
		"TopExpand ×":  func(c *tree.Config) { c.M, c.TopExpand = tree.MaxM, tree.MaxChildren/tree.MaxM+1 },
		"MaxStaleness": func(c *tree.Config) { c.MaxStaleness = -2 },
		"OnPublish":    func(c *tree.Config) { c.OnPublish = "restart" },
		"PendingTTLMs": func(c *tree.Config) { c.PendingTTLMs = 0 },
		"RemoteScores": func(c *tree.Config) { c.RemoteScores, c.NoScoring = true, true },
	} {
		cfg := tree.DefaultConfig()
		mut(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, tree.ErrInvalidConfig) || !strings.Contains(err.Error(), name+" ") {
			t.Errorf("%s past its bound: %v", name, err)
		}
	}
	// At the bound of the product, and with every field bad at once: all
	// of them are named.
	cfg := tree.DefaultConfig()
	cfg.M, cfg.TopExpand = tree.MaxM, tree.MaxChildren/tree.MaxM
	if err := cfg.Validate(); err != nil {
		t.Errorf("TopExpand × M = MaxChildren: %v", err)
	}
	cfg.OnPublish, cfg.PendingTTLMs = "restart", 0
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "OnPublish") || !strings.Contains(err.Error(), "PendingTTLMs") {
		t.Errorf("two fields bad: %v, want both named", err)
	}
}

// Coordinator options past their bounds are refused; the bounds
// themselves are accepted.
func TestCoordinatorOptionsBounds(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	newRun(t, db, "r", cfg)
	for _, o := range []tree.CoordinatorOptions{
		{LeaseTTL: -time.Second}, {LeaseTTL: tree.MaxLeaseTTL + time.Millisecond},
		{MaxAttempts: -1}, {MaxAttempts: tree.MaxMaxAttempts + 1},
	} {
		if _, err := tree.NewCoordinator(db, "r", &cfg, &o); !errors.Is(err, tree.ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", o, err)
		}
	}
	for _, o := range []tree.CoordinatorOptions{{LeaseTTL: tree.MaxLeaseTTL}, {MaxAttempts: tree.MaxMaxAttempts}, {MaxAttempts: 1}} {
		if _, err := tree.NewCoordinator(db, "r", &cfg, &o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// flaky fails the policy or env of chosen branches, by TurnKey.Branch and
// attempt: fails[branch] is how many attempts fail.
type flaky struct {
	mu    sync.Mutex
	fails map[uint64]int
	seen  map[uint64]bool
}

func (f *flaky) failing(key rollout.TurnKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return key.Attempt < f.fails[key.Branch]
}

type flakyPolicy struct {
	inner rollout.Policy
	f     *flaky
}

func (p flakyPolicy) Act(ctx context.Context, key rollout.TurnKey, task rollout.Task, hist []model.Turn) (rollout.Move, error) {
	if p.f.failing(key) {
		return rollout.Move{}, errors.New("CUDA out of memory")
	}
	return p.inner.Act(ctx, key, task, hist)
}

// TestFailureIsolation: a branch whose policy fails is retried with its
// attempt recorded; one that keeps failing is recorded failed with the
// error, never as a leaf with a zero reward, and its group still closes
// with GRPO over the other leaves.
func TestFailureIsolation(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 6, 3
	newRun(t, db, "r", cfg)
	// Which branch keys exist is known only once the roots are open: fail
	// the first root of group 1 for ever, the second once.
	var keys []uint64
	probe, err := tree.NewCoordinator(db, "r", &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	openStep(t, probe, 1, tasks(2))
	for _, l := range lease(t, probe, tree.LeaseRequest{Worker: "probe"}) {
		keys = append(keys, l.Key.Branch)
	}
	f := &flaky{fails: map[uint64]int{keys[0]: 100, keys[1]: 1}}
	o := hashOpts(cfg, tree.CommitInterval, false, nil)
	o.Policy = flakyPolicy{inner: o.Policy, f: f}
	res, err := mustEngine(t, db, "r", o).Rollout(context.Background(), 1, tasks(2))
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 1 || res.Retries != tree.DefaultMaxAttempts-1+1 {
		t.Errorf("failed %d, retries %d; want 1 and %d", res.Failed, res.Retries, tree.DefaultMaxAttempts)
	}
	got := dumpRun(t, db, "r")
	n1, n2 := got.Nodes[0], got.Nodes[1]
	if n1.Status != model.NodeFailed || n1.Attempt != tree.DefaultMaxAttempts-1 || !strings.Contains(n1.Error, "CUDA out of memory") || n1.HasReward {
		t.Errorf("always-failing branch: %+v", n1)
	}
	if n2.Status == model.NodeFailed || n2.Attempt != 1 || !strings.Contains(n2.Error, "CUDA") {
		t.Errorf("once-failing branch: status %s attempt %d error %q", n2.Status, n2.Attempt, n2.Error)
	}
	for _, a := range got.Adv {
		if a.Leaf == n1.ID {
			t.Errorf("the failed branch has an advantage: %+v", a)
		}
	}
	for _, g := range got.Groups {
		if g.Status != model.GroupClosed {
			t.Errorf("group %d is %s", g.ID, g.Status)
		}
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// slowBatch counts calls and the largest batch.
type countingBatch struct {
	inner rollout.Policy
	mu    sync.Mutex
	calls int
	sizes []int
}

func (p *countingBatch) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	p.mu.Lock()
	p.calls++
	p.sizes = append(p.sizes, len(reqs))
	p.mu.Unlock()
	return tree.Batched(p.inner).ActBatch(ctx, reqs)
}

// TestBatchedEqualsSerial: the engine asks the policy once per round for
// every branch that needs a turn (or per MaxBatch of them), and the tree
// it grows is the one a one-branch-per-call policy grows.
func TestBatchedEqualsSerial(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 3, 12, 9
	ts := tasks(6)
	newRun(t, db, "serial", cfg)
	base, err := mustEngine(t, db, "serial", hashOpts(cfg, tree.CommitInterval, true, nil)).Rollout(context.Background(), 1, ts)
	if err != nil {
		t.Fatal(err)
	}
	want := dumpRun(t, db, "serial")
	for _, maxBatch := range []int{0, 5} {
		run := fmt.Sprint("batch-", maxBatch)
		newRun(t, db, run, cfg)
		o := hashOpts(cfg, tree.CommitInterval, true, nil)
		bp := &countingBatch{inner: o.Policy}
		o.BatchPolicy, o.MaxBatch = bp, maxBatch
		res, err := mustEngine(t, db, run, o).Rollout(context.Background(), 1, ts)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffDump(dumpRun(t, db, run), want); d != "" {
			t.Fatalf("%s differs from the serial run: %s", run, d)
		}
		if res.PolicyCalls != bp.calls || res.EnvSteps != base.EnvSteps {
			t.Errorf("%s: %d calls reported, %d made; %d env steps, want %d", run, res.PolicyCalls, bp.calls, res.EnvSteps, base.EnvSteps)
		}
		largest := 0
		for _, s := range bp.sizes {
			largest = max(largest, s)
		}
		switch {
		case maxBatch == 0 && largest < len(ts)*cfg.B0:
			t.Errorf("%s: largest batch %d, want every root of every group (%d)", run, largest, len(ts)*cfg.B0)
		case maxBatch > 0 && largest > maxBatch:
			t.Errorf("%s: a batch of %d over MaxBatch %d", run, largest, maxBatch)
		}
		if maxBatch == 0 && bp.calls*4 > base.EnvSteps {
			t.Errorf("%s: %d policy calls for %d turns", run, bp.calls, base.EnvSteps)
		}
	}
}

// byBranch wraps the hash fakes so that their randomness follows the
// branch's place in its tree (TurnKey.Branch), not the node id the store
// gave it, which depends on which worker routed which group first.
type byBranch struct{ inner rollout.Policy }

func (p byBranch) Act(ctx context.Context, key rollout.TurnKey, task rollout.Task, hist []model.Turn) (rollout.Move, error) {
	key.Node = key.Branch
	return p.inner.Act(ctx, key, task, hist)
}

type byBranchEnv struct{ inner rollout.Env }

type byBranchEpisode struct{ inner rollout.Episode }

func (e byBranchEnv) Reset(ctx context.Context, task rollout.Task) (rollout.Episode, error) {
	ep, err := e.inner.Reset(ctx, task)
	return byBranchEpisode{ep}, err
}

func (e byBranchEnv) Restore(ctx context.Context, task rollout.Task, hist []model.Turn, state []byte) (rollout.Episode, error) {
	ep, err := e.inner.Restore(ctx, task, hist, state)
	return byBranchEpisode{ep}, err
}

func (ep byBranchEpisode) Step(ctx context.Context, key rollout.TurnKey, mv rollout.Move) (rollout.Observation, error) {
	key.Node = key.Branch
	return ep.inner.Step(ctx, key, mv)
}

func (ep byBranchEpisode) State() []byte { return ep.inner.State() }

// canonical describes a run's trees without node ids: each node by its
// group's task and the ordinals from its root, with what it holds.
func canonical(t *testing.T, db *store.DB, run string) []string {
	t.Helper()
	d := dumpRun(t, db, run)
	byID := map[uint64]model.Node{}
	for _, n := range d.Nodes {
		byID[n.ID] = n
	}
	task := map[uint64]string{}
	for _, g := range d.Groups {
		task[g.ID] = fmt.Sprintf("%s/%s/i%d", g.Task, g.Status, g.Interval)
	}
	place := func(n model.Node) string {
		var ords []string
		for {
			ords = append([]string{fmt.Sprint(n.Ordinal)}, ords...)
			if n.Parent == 0 {
				break
			}
			n = byID[n.Parent]
		}
		return task[n.Group] + ":" + strings.Join(ords, ".")
	}
	adv := map[uint64]float64{}
	for _, a := range d.Adv {
		adv[a.Leaf] = a.Advantage
	}
	var out []string
	for _, n := range d.Nodes {
		var acts []string
		for _, tn := range d.Turns[n.ID] {
			acts = append(acts, tn.Action)
		}
		var decs []string
		for _, dc := range n.Decisions {
			decs = append(decs, fmt.Sprintf("%d:%s/%s/%d@%.4f", dc.Interval, dc.Action, dc.Rule, dc.Children, dc.Score))
		}
		a, hasAdv := adv[n.ID]
		out = append(out, fmt.Sprintf("%s %s fork%d %v %v %v reward=%t:%v adv=%t:%v", place(n), n.Status, n.Fork, acts, n.Scores, decs, n.HasReward, n.Reward, hasAdv, a))
	}
	sort.Strings(out)
	return out
}

// worker grows branches of step through the coordinator until no group is
// open, as a worker process would over HTTP: lease a few branches, sample
// their intervals one by one, submit each, close the groups it finished.
func worker(ctx context.Context, c *tree.Coordinator, name string, step uint64, o tree.Options, rng *rand.Rand) error {
	db := c.DB()
	for {
		ls, err := c.Lease(tree.LeaseRequest{Worker: name, Max: 1 + rng.IntN(3), Step: step}, nil)
		if err != nil {
			return err
		}
		open := 0
		if err := db.View(func(tx *store.Tx) error {
			r, _ := tx.Run(c.Run())
			return r.ForEachGroup(step, func(g model.Group) error {
				if g.Status == model.GroupOpen {
					open++
				}
				return nil
			})
		}); err != nil {
			return err
		}
		if open == 0 {
			return nil
		}
		if len(ls) == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		for _, l := range ls {
			var hist []model.Turn
			if err := db.View(func(tx *store.Tx) error {
				r, _ := tx.Run(c.Run())
				path, err := r.Trajectory(l.Node)
				for _, pt := range path {
					hist = append(hist, pt.Turn)
				}
				return err
			}); err != nil {
				return err
			}
			var ep rollout.Episode
			var err error
			if len(hist) == 0 && l.EnvState == nil {
				ep, err = o.Env.Reset(ctx, l.Task)
			} else {
				ep, err = o.Env.Restore(ctx, l.Task, hist, l.EnvState)
			}
			if err != nil {
				return err
			}
			s := rollout.Submission{Lease: l.ID, Worker: l.Worker, Node: l.Node, From: l.From}
			ended := false
			for i := 0; i < l.Turns && !ended; i++ {
				key := l.Key
				key.Index, key.Path = key.Index+i, key.Path+i
				mv, err := o.Policy.Act(ctx, key, l.Task, hist)
				if err != nil {
					return err
				}
				obs, err := ep.Step(ctx, key, mv)
				if err != nil {
					return err
				}
				tn := model.Turn{Action: mv.Text, ActionTokens: mv.Tokens, ActionLogprobs: mv.Logprobs, Observation: obs.Text,
					ObservationTokens: obs.Tokens, Reward: obs.Reward, Done: obs.Done}
				hist = append(hist, tn)
				s.Turns = append(s.Turns, tn)
				ended = obs.Done || (o.Config.MaxTurns > 0 && len(hist) >= o.Config.MaxTurns)
			}
			if l.Score && !ended {
				v, err := o.Scorer.Score(ctx, l.Task, hist)
				if err != nil {
					return err
				}
				s.Score = &v
			}
			s.EnvState = ep.State()
			var sub *rollout.Submitted
			err = db.Update(func(tx *store.Tx) (err error) {
				sub, err = c.Submit(tx, []rollout.Submission{s})
				return err
			})
			if errors.Is(err, rollout.ErrLeaseLost) {
				continue
			}
			if err != nil {
				return err
			}
			for _, g := range sub.Done {
				err := db.Update(func(tx *store.Tx) error {
					_, err := c.Close(tx, step, g, nil, 0)
					return err
				})
				if err != nil && !errors.Is(err, rollout.ErrConflict) {
					return err
				}
			}
		}
	}
}

// TestConcurrentWorkers: four workers leasing from one coordinator grow
// the same trees as the in-process engine, with a policy keyed by the
// branch's place; no interval is done twice and check is clean.
func TestConcurrentWorkers(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.K, cfg.MaxTurns, cfg.Seed = 2, 10, 5
	ts := tasks(5)
	o := hashOpts(cfg, tree.CommitInterval, true, nil)
	o.Policy = byBranch{o.Policy}
	o.Env = byBranchEnv{o.Env}
	newRun(t, db, "engine", cfg)
	if _, err := mustEngine(t, db, "engine", o).Rollout(context.Background(), 1, ts); err != nil {
		t.Fatal(err)
	}
	want := canonical(t, db, "engine")

	c := coordinator(t, db, "workers", cfg, &tree.CoordinatorOptions{LeaseTTL: time.Hour})
	openStep(t, c, 1, ts)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = worker(context.Background(), c, fmt.Sprint("w", i), 1, o, rand.New(rand.NewPCG(uint64(i), 7)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	// No interval was done twice: every turns event appends after the
	// node's stored turns, none rewrites them.
	if err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("workers")
		return r.Events(1, func(e model.Event) error {
			if e.Kind != model.EvTurns {
				return nil
			}
			var p model.TurnsPayload
			if err := store.DecodePayload(e, &p); err != nil {
				return err
			}
			if p.Turns != p.From+p.Count {
				t.Errorf("event %d rewrote turns %d..%d of node %d (it had %d)", e.Seq, p.From, p.From+p.Count, e.Node, p.Turns)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if got := canonical(t, db, "workers"); !reflect.DeepEqual(got, want) {
		t.Fatalf("workers grew other trees than the engine:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}

// A task the store refuses (a prompt that is not UTF-8) fails OpenStep
// with ErrInvalid and opens nothing: not a group without its branches.
func TestOpenStepRefusesATaskTheStoreRefuses(t *testing.T) {
	db := storetest.Open(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	err := db.Update(func(tx *store.Tx) error {
		_, err := c.OpenStep(tx, 1, []rollout.Task{{ID: "a", Prompt: "\xff"}})
		return err
	})
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "prompt") {
		t.Fatalf("a task with a prompt that is not UTF-8: %v, want ErrInvalid naming the prompt", err)
	}
	if got := dumpRun(t, db, "r"); len(got.Groups) != 0 || len(got.Nodes) != 0 {
		t.Errorf("a refused open wrote %d groups, %d nodes", len(got.Groups), len(got.Nodes))
	}
}
