package rubricpool

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// world generates a QA-like training run deterministically: each step has
// `groups` groups of `size` trajectories. A trajectory's hidden quality
// drives its answer (the first k words of the gold answer), so token F1
// is the outcome; the base reward is exact match, so most groups have
// zero variance. Its features: progress and revisits track quality,
// format is sometimes broken early in the run and always right after
// step 4 (a rubric about it becomes "mastered"), noise is unrelated to
// anything (a rubric about it turns out uncorrelated).
type world struct {
	seed         uint64
	groups, size int
}

const worldGold = "amber lantern beside river gate"

func (w world) unit(step uint64, group, ord, k int) float64 {
	h := splitmix64(w.seed ^ splitmix64(step<<32|uint64(group)<<16|uint64(ord)<<4|uint64(k)))
	return float64(h>>11) / (1 << 53)
}

// turns returns the two turns of a trajectory: features, then the answer.
func (w world) turns(step uint64, group, ord int) (model.Turn, model.Turn) {
	q := w.unit(step, group, ord, 0)
	progress := math.Round(q*10) / 10
	revisits := math.Round(((1-q)*0.7+0.3*w.unit(step, group, ord, 1))*10) / 10
	format := 1
	if step <= 4 && w.unit(step, group, ord, 2) < 0.3 {
		format = 0
	}
	noise := math.Floor(w.unit(step, group, ord, 3)*4) / 4
	answer := "unparsable"
	if format == 1 {
		answer = strings.Join(strings.Fields(worldGold)[:int(math.Round(q*5))], " ")
	}
	obs := fmt.Sprintf("progress=%v revisits=%v format=%d noise=%v", progress, revisits, format, noise)
	return model.Turn{Action: "think", Observation: obs}, model.Turn{Action: answer, Observation: "done", Done: true}
}

// runner drives a world through the pool the way the tree engine does,
// and can "crash" at any point: drop the Pool, close and reopen the file,
// and continue from what the store says is done.
type runner struct {
	t     *testing.T
	w     world
	cfg   Config
	path  string
	db    *store.DB
	pool  *Pool
	crash func(point string) bool // nil: never
	// crashes counts the crashes per point.
	crashes map[string]int
}

var errCrash = errors.New("simulated crash")

func newRunner(t *testing.T, w world, cfg Config) *runner {
	r := &runner{t: t, w: w, cfg: cfg, path: filepath.Join(t.TempDir(), "patr.db"), crashes: map[string]int{}}
	// The first handle registers the full Check of the final file; the
	// handles reopen makes are checked when they "crash" instead, and the
	// last one is closed before that final check runs.
	r.db = storetest.OpenPath(t, r.path, storetest.Options())
	t.Cleanup(func() { _ = r.db.Close() })
	if err := r.db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun(testRun, []byte(`{}`), nil); return err }); err != nil {
		t.Fatal(err)
	}
	r.newPool()
	return r
}

func (r *runner) newPool() {
	p, err := New(r.db, testRun, r.cfg, &featureInducer{}, &featureConsolidator{}, &featureJudge{}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.pool = p
}

// reopen is the crash: nothing of the old Pool or DB handle survives. The
// state the crash left is checked in full first.
func (r *runner) reopen() {
	storetest.MustCheckClose(r.t, r.db)
	db, err := store.Open(r.path, storetest.Options())
	if err != nil {
		r.t.Fatal(err)
	}
	r.db = db
	r.newPool()
}

func (r *runner) crashAt(point string) bool {
	if r.crash != nil && r.crash(point) {
		r.crashes[point]++
		return true
	}
	return false
}

// run completes steps 1..steps, restarting after every crash.
func (r *runner) run(steps int) {
	for !r.attempt(steps) {
		r.reopen()
	}
}

// attempt runs from wherever the store says the run is; false on a crash.
func (r *runner) attempt(steps int) bool {
	t := r.t
	for step := uint64(1); step <= uint64(steps); step++ {
		groups := r.ensureGroups(step)
		if groups == nil {
			continue // the step is done
		}
		if r.crashAt("before-begin") {
			return false
		}
		if _, err := r.pool.BeginStep(ctx, step); err != nil {
			t.Fatal(err)
		}
		if r.crashAt("after-begin") {
			return false
		}
		for _, g := range groups {
			if g.Status == model.GroupClosed {
				continue
			}
			trajs := r.load(g)
			res, err := r.pool.Prepare(ctx, step, g, trajs)
			if err != nil {
				t.Fatalf("step %d group %d: %v", step, g.ID, err)
			}
			if r.crashAt("after-prepare") {
				return false
			}
			err = r.db.Update(func(tx *store.Tx) error {
				if err := commitGroup(tx, res, trajs); err != nil {
					return err
				}
				if r.crashAt("inside-apply") {
					return errCrash // the transaction rolls back
				}
				return nil
			})
			if errors.Is(err, errCrash) {
				return false
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.crashAt("after-apply") {
				return false
			}
		}
	}
	return true
}

// ensureGroups creates the step's groups once and returns them, or nil
// when they are all closed.
func (r *runner) ensureGroups(step uint64) []model.Group {
	var groups []model.Group
	err := r.db.UpdateRun(testRun, func(run *store.RunTx) error {
		var err error
		if groups, err = run.Groups(step); err != nil || len(groups) > 0 {
			return err
		}
		for gi := range r.w.groups {
			g, err := run.OpenGroup(store.GroupSpec{Step: step, Task: "q" + strconv.Itoa(gi), Gold: worldGold})
			if err != nil {
				return err
			}
			for i := range r.w.size {
				n, err := run.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i})
				if err != nil {
					return err
				}
				a, b := r.w.turns(step, gi, i)
				if err := run.AppendTurns(n.ID, 0, a, b); err != nil {
					return err
				}
				if err := run.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
					return err
				}
				reward := 0.0
				if TokenF1(b.Action, worldGold) == 1 {
					reward = 1
				}
				if err := run.SetReward(n.ID, reward); err != nil {
					return err
				}
			}
			if g, err = run.GroupAt(step, g.ID); err != nil {
				return err
			}
			groups = append(groups, g)
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, g := range groups {
		if g.Status != model.GroupClosed {
			return groups
		}
	}
	return nil
}

// load reads a group's leaves as the tree engine hands them to a shaper:
// sorted by node id, with full trajectories, outcome = F1Outcome.
func (r *runner) load(g model.Group) []Trajectory {
	var out []Trajectory
	err := r.db.ViewRun(testRun, func(run *store.RunTx) error {
		nodes, err := run.GroupNodes(g)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			turns, err := run.Trajectory(n.ID)
			if err != nil {
				return err
			}
			out = append(out, Trajectory{Node: n.ID, Reward: n.Reward, Outcome: F1Outcome(g, turns), Turns: turns})
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	slices.SortFunc(out, func(a, b Trajectory) int { return int(a.Node) - int(b.Node) })
	return out
}

// dump is everything a run stored that a crash must not change: every
// rubric, every advantage and every event but its time.
type dump struct {
	Rubrics []model.Rubric
	Advs    []model.Advantage
	Events  []model.Event
}

func (r *runner) dump() dump {
	var d dump
	err := r.db.ViewRun(testRun, func(run *store.RunTx) error {
		var err error
		if d.Rubrics, err = run.Rubrics(""); err != nil {
			return err
		}
		if d.Advs, err = run.Advantages(0, 0); err != nil {
			return err
		}
		return run.Events(1, func(e model.Event) error {
			e.Time = 0
			d.Events = append(d.Events, e)
			return nil
		})
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

var realisticWorld = world{seed: 20260101, groups: 4, size: 6}

const realisticSteps = 14

// A realistic run with the fakes puts rubrics in all four pools, retires
// rubrics by both rules, and unlocks zero-variance groups.
func TestRealisticRunUsesAllPools(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 11
	r := newRunner(t, realisticWorld, cfg)
	r.run(realisticSteps)
	s, err := r.pool.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d := r.dump()
	count := map[model.EventKind]int{}
	reasons := map[string]int{}
	for _, e := range d.Events {
		count[e.Kind]++
		if e.Kind == model.EvRubricMove {
			rb := decode[model.Rubric](t, e)
			if rb.Pool == model.PoolRetired {
				reasons[strings.SplitN(rb.RetireReason, ":", 2)[0]]++
			}
		}
	}
	zero, unlocked := 0, 0
	for _, e := range d.Events {
		if e.Kind == EvScore {
			pl := decode[ScorePayload](t, e)
			if pl.ZeroVariance {
				zero++
				if !pl.ZeroVarianceAfter {
					unlocked++
				}
			}
		}
	}
	t.Logf("pools: %d candidate, %d public, %d retired, %d merged; events %v; retire reasons %v; unlocked %d of %d zero-variance groups",
		len(s.Candidate), len(s.Public), len(s.Retired), len(s.Merged), count, reasons, unlocked, zero)
	if count[EvAdmit] == 0 || count[EvReject] == 0 || count[EvSupport] == 0 || count[EvConsolidate] == 0 {
		t.Errorf("lifecycle events missing: %v", count)
	}
	if len(s.Public) == 0 || len(s.Retired) == 0 || len(s.Merged) == 0 {
		t.Errorf("pools not all in use: %d public, %d retired, %d merged", len(s.Public), len(s.Retired), len(s.Merged))
	}
	if reasons["mastered"] == 0 || reasons["uncorrelated"] == 0 {
		t.Errorf("retirement rules not both exercised: %v", reasons)
	}
	if unlocked == 0 {
		t.Error("shaping unlocked no zero-variance group")
	}
	for _, rb := range s.Merged {
		if into := rubricIn(d.Rubrics, rb.MergedInto); into.Pool != model.PoolPublic && into.Pool != model.PoolRetired ||
			!slices.Contains(into.Parents, rb.ID) {
			t.Errorf("merged draft %d points at %d (%s, parents %v)", rb.ID, rb.MergedInto, into.Pool, into.Parents)
		}
	}
}

func rubricIn(rs []model.Rubric, id uint64) model.Rubric {
	for _, rb := range rs {
		if rb.ID == id {
			return rb
		}
	}
	return model.Rubric{}
}

// Crashes between Prepare and Apply, inside Apply's transaction, around
// BeginStep and between steps leave the pools, statistics, advantages and
// event log exactly as an uninterrupted run under the same seed.
func TestCrashConsistency(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 11
	ref := newRunner(t, realisticWorld, cfg)
	ref.run(realisticSteps)
	want := ref.dump()

	// RUBRICPOOL_CRASH_SCHEDULES=n runs n crash schedules instead.
	schedules := 2
	if testing.Short() {
		schedules = 1
	}
	if s := os.Getenv("RUBRICPOOL_CRASH_SCHEDULES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("RUBRICPOOL_CRASH_SCHEDULES=%q", s)
		}
		schedules = n
	}
	for sched := range schedules {
		rng := rand.New(rand.NewPCG(uint64(sched), 99))
		r := newRunner(t, realisticWorld, cfg)
		r.crash = func(string) bool { return rng.Float64() < 0.1 }
		r.run(realisticSteps)
		got := r.dump()
		total := 0
		for _, c := range r.crashes {
			total += c
		}
		t.Logf("schedule %d: %d crashes %v", sched, total, r.crashes)
		if total < 10 || r.crashes["after-prepare"] == 0 || r.crashes["inside-apply"] == 0 {
			t.Fatalf("schedule %d crashed too little to mean anything: %v", sched, r.crashes)
		}
		if !reflect.DeepEqual(got.Rubrics, want.Rubrics) {
			t.Fatalf("schedule %d: rubrics differ\n got %+v\nwant %+v", sched, got.Rubrics, want.Rubrics)
		}
		if !reflect.DeepEqual(got.Advs, want.Advs) {
			t.Fatalf("schedule %d: advantages differ", sched)
		}
		if len(got.Events) != len(want.Events) {
			t.Fatalf("schedule %d: %d events, want %d", sched, len(got.Events), len(want.Events))
		}
		for i := range got.Events {
			if !reflect.DeepEqual(got.Events[i], want.Events[i]) {
				t.Fatalf("schedule %d: event %d differs:\n got %+v\nwant %+v", sched, i+1, got.Events[i], want.Events[i])
			}
		}
	}
}

// The running Pearson correlation in each rubric's usage equals a two-pass
// computation over every (win rate, outcome) pair it was fed, also across
// a close and reopen of the file. The pairs are rebuilt from the recorded
// verdicts and the runner's own outcomes, not from the stored sums.
func TestRunningPearsonAcrossReopen(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 5
	r := newRunner(t, realisticWorld, cfg)
	outcomes := map[uint64]float64{}
	check := func(when string) {
		t.Helper()
		for _, g := range r.groupsSoFar() {
			for _, x := range r.load(g) {
				outcomes[x.Node] = TokenF1(x.Turns[len(x.Turns)-1].Action, worldGold)
			}
		}
		xs, ys := map[uint64][]float64{}, map[uint64][]float64{}
		d := r.dump()
		for _, e := range d.Events {
			if e.Kind != EvJudge {
				continue
			}
			pl := decode[JudgePayload](t, e)
			at := map[uint64]int{}
			for i, n := range pl.Nodes {
				at[n] = i
			}
			var js []Judgement
			for _, v := range pl.Verdicts {
				js = append(js, Judgement{A: at[v.A], B: at[v.B], Result: v.Result})
			}
			wr := WinRates(len(pl.Nodes), js)
			if !slices.Equal(wr, pl.WinRates) {
				t.Fatalf("%s: event %d win rates %v, verdicts give %v", when, e.Seq, pl.WinRates, wr)
			}
			for i, n := range pl.Nodes {
				xs[e.Rubric] = append(xs[e.Rubric], wr[i])
				ys[e.Rubric] = append(ys[e.Rubric], outcomes[n])
			}
		}
		checked := 0
		for _, rb := range d.Rubrics {
			if rb.Usage.N == 0 {
				continue
			}
			if rb.Usage.N != float64(len(xs[rb.ID])) {
				t.Fatalf("%s: rubric %d has N=%v, fed %d pairs", when, rb.ID, rb.Usage.N, len(xs[rb.ID]))
			}
			got, gok := Rho(rb.Usage)
			want, wok := Pearson(xs[rb.ID], ys[rb.ID])
			if gok != wok || math.Abs(got-want) > 1e-9 {
				t.Fatalf("%s: rubric %d running rho %v,%v; two-pass %v,%v", when, rb.ID, got, gok, want, wok)
			}
			if wok {
				checked++
			}
		}
		if checked == 0 {
			t.Fatalf("%s: no rubric with a defined correlation to check", when)
		}
		t.Logf("%s: %d rubric correlations match", when, checked)
	}
	r.run(7)
	check("before reopen")
	r.reopen()
	r.run(realisticSteps)
	check("after reopen")
}

func (r *runner) groupsSoFar() []model.Group {
	var gs []model.Group
	if err := r.db.ViewRun(testRun, func(run *store.RunTx) error {
		var err error
		gs, err = run.Groups(0)
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
	return gs
}
