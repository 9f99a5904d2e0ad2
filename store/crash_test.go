package store_test

// The crash loop (RELIABILITY.md).
//
// A child process — this test binary re-executed with PATRDB_CRASH_CHILD
// set — writes a seeded PaTR-shaped workload through the store API with
// fsync on and prints "ack <i>" after Update returns for transaction i. The
// parent SIGKILLs it after a random delay, or the child kills itself at a
// named point inside a logical write, and the parent then proves:
//
//   - the file opens and Check is clean;
//   - the committed transactions are exactly 1..C with C = last ack or last
//     ack + 1 (the in-flight one may or may not have reached its meta page),
//     and C never goes back;
//   - every bucket, key, value and bucket sequence equals, byte for byte, a
//     reference store the parent built by replaying transactions 1..C of the
//     same seed in-process — so every acknowledged write is present and
//     nothing of an unacknowledged one is half-present;
//   - the next child resumes from what is there (its first transaction is
//     the recovery write, which can itself be killed).
//
// The workload is state-driven: transaction i reads the store (open groups,
// frontier, pools) and draws from a PRNG seeded by (seed, i), so replaying
// it against the same committed state writes the same bytes. The clock is a
// function of i too.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// ---------------------------------------------------------------------------
// The workload.

// Shape of the seeded workload: small trees so a child commits many
// transactions in the time a kill can land, big enough to expand, prune,
// complete, truncate, close groups, move rubrics and checkpoint steps.
const (
	wlSteps    = 2 // steps per run; a finished run is followed by a new one
	wlGroups   = 2 // groups per step
	wlB0       = 3 // root branches per group
	wlK        = 2 // at most K turns per node per interval
	wlM        = 2 // children per expansion
	wlMaxDepth = 2
	wlMaxTurns = 6 // path length at which a branch is truncated
	wlDelta    = 0.35
)

// Custom event kinds the workload writes.
const (
	evTxMarker = model.EventKind("crashtest.tx")     // last write of every transaction: payload [i, resume]
	evResume   = model.EventKind("crashtest.resume") // first write of a child's first transaction
)

// workload writes transaction i of the seeded workload. hook is called at
// named points between the steps of a logical write (nil: no hooks).
type workload struct {
	seed  uint64
	hook  func(point string)
	tx    uint64 // the transaction being written; the clock reads it
	calls int64
}

func newWorkload(seed uint64, hook func(string)) *workload {
	return &workload{seed: seed, hook: hook}
}

// clock stamps events deterministically: transaction i gets second i after
// a base derived from the seed, each call inside it one microsecond more.
func (w *workload) clock() time.Time {
	w.calls++
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(w.seed%997) * time.Hour)
	return base.Add(time.Duration(w.tx)*time.Second + time.Duration(w.calls)*time.Microsecond)
}

func (w *workload) at(point string) {
	if w.hook != nil {
		w.hook(point)
	}
}

// options are the store options both the child and the reference use; only
// NoSync differs.
func (w *workload) options(noSync bool) *store.Options {
	o := store.DefaultOptions()
	o.NoSync = noSync
	o.Clock = w.clock
	o.Timeout = 10 * time.Second
	o.PageSize = 4096
	return o
}

// apply writes transaction i as one Update. resume marks the first
// transaction of a writer that found the file as a previous one left it.
func (w *workload) apply(db *store.DB, i uint64, resume bool) error {
	w.tx, w.calls = i, 0
	rng := rand.New(rand.NewPCG(w.seed, i))
	return db.Update(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		if err != nil {
			return err
		}
		var r *store.RunTx
		var info model.Run
		if len(ids) > 0 {
			if r, err = tx.Run(ids[len(ids)-1]); err != nil {
				return err
			}
			if info, err = r.Info(); err != nil {
				return err
			}
		}
		created := false
		if r == nil || info.Status == model.RunFinished {
			id := fmt.Sprintf("run-%04d", len(ids)+1)
			cfg := fmt.Appendf(nil, `{"b0":%d,"k":%d,"m":%d,"delta":%g,"seed":%d}`, wlB0, wlK, wlM, wlDelta, w.seed)
			meta := map[string]string{"workload": "crashtest", "seed": strconv.FormatUint(w.seed, 10), "host": "child"}
			if r, err = tx.CreateRun(id, cfg, meta); err != nil {
				return err
			}
			created = true
		}
		if resume {
			if _, err := r.AppendEvent(evResume, 0, 0, 0, 0, []uint64{i}); err != nil {
				return err
			}
			w.at("recovery")
		}
		if !created {
			if err := w.step(r, info, rng); err != nil {
				return err
			}
		}
		flag := uint64(0)
		if resume {
			flag = 1
		}
		if _, err := r.AppendEvent(evTxMarker, 0, 0, 0, 0, []uint64{i, flag}); err != nil {
			return err
		}
		w.at("precommit")
		return nil
	})
}

// step does the next unit of work of a run: an interval of the first open
// group, or closing it, or opening the next group, or the step's checkpoint,
// or finishing the run.
func (w *workload) step(r *store.RunTx, info model.Run, rng *rand.Rand) error {
	groups, err := r.Groups(0)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g.Status != model.GroupOpen {
			continue
		}
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		var active []model.Node
		for _, n := range nodes {
			if n.Status == model.NodeActive {
				active = append(active, n)
			}
		}
		if len(active) > 0 {
			return w.interval(r, g, active, rng)
		}
		return w.closeGroup(r, g, nodes, rng)
	}
	cur := info.LastStep + 1
	if cur > wlSteps {
		return r.SetRunStatus(model.RunFinished)
	}
	n := 0
	for _, g := range groups {
		if g.Step == cur {
			n++
		}
	}
	if n < wlGroups {
		return w.openGroup(r, cur, n, rng)
	}
	// The trainer's figures: one transaction of their own, then one more
	// merged into the step's record with the checkpoint.
	if _, err := r.ScalarsAt(cur); errors.Is(err, model.ErrNotFound) {
		return r.PutScalars(cur, map[string]float64{"loss": rng.Float64(), "kl": rng.Float64() / 10, "grad_norm": rng.NormFloat64()})
	} else if err != nil {
		return err
	}
	if err := r.PutScalars(cur, map[string]float64{"lr": 1e-6 * float64(cur), "loss": rng.Float64()}); err != nil {
		return err
	}
	inline := make([]byte, 24)
	for j := range inline {
		inline[j] = byte(rng.Uint32())
	}
	return r.PutCheckpoint(model.Checkpoint{Step: cur, Inline: inline,
		Meta: map[string]string{"policy": "tabular", "optimizer": "adam", "rng": strconv.FormatUint(rng.Uint64(), 16)}})
}

func (w *workload) openGroup(r *store.RunTx, step uint64, n int, rng *rand.Rand) error {
	g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: fmt.Sprintf("task-%d-%d", step, n),
		Prompt: wlWords(rng, 6), Gold: wlWords(rng, 2), Meta: map[string]string{"map": "4x4", "slippery": "true"}})
	if err != nil {
		return err
	}
	for j := 0; j < wlB0; j++ {
		if _, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: j,
			EnvState: []byte{byte(rng.Uint32()), byte(j)}, Worker: fmt.Sprintf("w%d", rng.IntN(4))}); err != nil {
			return err
		}
	}
	return nil
}

// interval advances every active node of g by up to K turns, scores and
// routes the survivors, and expands the best one — PaTR's loop body.
func (w *workload) interval(r *store.RunTx, g model.Group, active []model.Node, rng *rand.Rand) error {
	type live struct {
		id    uint64
		turns int
		path  int
		depth int
		score float64
	}
	var alive []live
	for _, n := range active {
		k := 1 + rng.IntN(wlK)
		if n.PathLen()+k > wlMaxTurns {
			k = wlMaxTurns - n.PathLen()
		}
		turns := make([]model.Turn, k)
		done := false
		for j := range turns {
			turns[j] = wlTurn(rng)
			if rng.IntN(8) == 0 {
				turns[j].Done, done = true, true
				turns = turns[:j+1]
				break
			}
		}
		if len(turns) > 0 {
			if err := r.AppendTurns(n.ID, n.Turns, turns...); err != nil {
				return err
			}
		}
		path := n.PathLen() + len(turns)
		switch {
		case done:
			if err := wlFinishLeaf(r, n.ID, model.NodeCompleted, rng); err != nil {
				return err
			}
		case path >= wlMaxTurns:
			if err := wlFinishLeaf(r, n.ID, model.NodeTruncated, rng); err != nil {
				return err
			}
		default:
			alive = append(alive, live{id: n.ID, turns: n.Turns + len(turns), path: path, depth: n.Depth})
		}
	}
	w.at("turns")
	best := math.Inf(-1)
	for j := range alive {
		alive[j].score = math.Round(rng.Float64()*1000) / 1000
		if err := r.Score(alive[j].id, model.Score{Interval: g.Interval, Turn: alive[j].path, Value: alive[j].score}); err != nil {
			return err
		}
		best = max(best, alive[j].score)
	}
	w.at("score")
	// The best branch expands (if it may still deepen), those more than
	// Delta below it are pruned, the rest survive.
	top := -1
	for j, a := range alive {
		if a.depth < wlMaxDepth && (top < 0 || a.score > alive[top].score) {
			top = j
		}
	}
	var expand []live
	for j, a := range alive {
		d := model.Decision{Interval: g.Interval, Score: a.score, Reference: best, Delta: wlDelta, Rule: "max"}
		switch {
		case j == top:
			d.Action, d.Children = model.ActionExpand, wlM
			expand = append(expand, a)
		case a.score < best-wlDelta:
			d.Action = model.ActionPrune
		default:
			d.Action = model.ActionSurvive
		}
		if err := r.Route(a.id, d); err != nil {
			return err
		}
		if d.Action == model.ActionPrune {
			if err := r.SetReward(a.id, float64(rng.IntN(2))); err != nil {
				return err
			}
		}
	}
	w.at("route")
	for _, a := range expand {
		for j := 0; j < wlM; j++ {
			if _, err := r.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: a.id, Fork: rng.IntN(a.turns + 1),
				Ordinal: j, EnvState: []byte{byte(rng.Uint32())}, Worker: fmt.Sprintf("w%d", rng.IntN(4)), Attempt: rng.IntN(2)}); err != nil {
				return err
			}
		}
	}
	w.at("children")
	return r.SetGroupInterval(g.Step, g.ID, g.Interval+1)
}

func wlFinishLeaf(r *store.RunTx, id uint64, s model.NodeStatus, rng *rand.Rand) error {
	if err := r.SetReward(id, float64(rng.IntN(2))); err != nil {
		return err
	}
	return r.SetNodeStatus(id, s)
}

// closeGroup writes the GRPO advantages of the group's leaves, maybe moves
// rubrics, and closes the group.
func (w *workload) closeGroup(r *store.RunTx, g model.Group, nodes []model.Node, rng *rand.Rand) error {
	var leaves []model.Node
	var sum float64
	for _, n := range nodes {
		if n.Status.Leaf() {
			leaves = append(leaves, n)
			sum += n.Reward
		}
	}
	mean := sum / float64(len(leaves))
	var ss float64
	for _, n := range leaves {
		ss += (n.Reward - mean) * (n.Reward - mean)
	}
	std := math.Sqrt(ss / float64(len(leaves)))
	for _, n := range leaves {
		rs := math.Round((rng.Float64()-0.5)*100) / 100
		total := n.Reward + 0.1*rs
		if err := r.PutAdvantage(model.Advantage{Step: g.Step, Group: g.ID, Leaf: n.ID, Outcome: n.Reward,
			RubricScore: rs, Lambda: 0.1, Total: total, Mean: mean, Std: std,
			Advantage: (n.Reward - mean) / (std + 1e-6), ZeroVariance: std == 0}); err != nil {
			return err
		}
	}
	w.at("close")
	if rng.IntN(2) == 0 {
		if err := w.rubricMoves(r, g, leaves, rng); err != nil {
			return err
		}
	}
	return r.CloseGroup(g.Step, g.ID)
}

// rubricMoves induces a draft and moves the pool along: a candidate is
// promoted when there is no public rubric, otherwise merged into one, and
// a public rubric is activated or retired.
func (w *workload) rubricMoves(r *store.RunTx, g model.Group, leaves []model.Node, rng *rand.Rand) error {
	anchors := []uint64{leaves[0].ID, leaves[len(leaves)-1].ID}
	if _, err := r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: wlWords(rng, 8),
		Origin: model.RubricOrigin{Step: g.Step, Group: g.ID, Anchors: anchors}, Support: 1,
		Variance: rng.Float64(), Rho: rng.Float64(), Usage: model.RubricUsage{LastActivation: -1}, CreatedStep: g.Step}); err != nil {
		return err
	}
	w.at("rubric")
	cands, err := r.Rubrics(model.PoolCandidate)
	if err != nil {
		return err
	}
	pubs, err := r.Rubrics(model.PoolPublic)
	if err != nil {
		return err
	}
	switch {
	case len(pubs) == 0:
		_, err = r.MoveRubric(cands[0].ID, store.RubricMove{To: model.PoolPublic, Step: g.Step})
	case len(cands) > 1:
		_, err = r.MoveRubric(cands[0].ID, store.RubricMove{To: model.PoolMerged, Step: g.Step, MergedInto: pubs[0].ID})
	case rng.IntN(3) == 0:
		_, err = r.MoveRubric(pubs[0].ID, store.RubricMove{To: model.PoolRetired, Step: g.Step, Reason: "low variance streak"})
	default:
		p := pubs[0]
		p.Usage.Activations++
		p.Usage.LastActivation = int64(g.Step)
		p.Usage.PairsJudged += len(leaves)
		x, y := rng.Float64(), rng.Float64()
		p.Usage.N++
		p.Usage.SumX += x
		p.Usage.SumY += y
		p.Usage.SumXY += x * y
		p.Usage.SumXX += x * x
		p.Usage.SumYY += y * y
		err = r.UpdateRubric(p)
	}
	return err
}

var wlVocab = strings.Fields("left right up down hole goal frozen ice step agent reward plan check move back wait")

func wlWords(rng *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = wlVocab[rng.IntN(len(wlVocab))]
	}
	return strings.Join(ws, " ")
}

func wlTurn(rng *rand.Rand) model.Turn {
	t := model.Turn{Action: wlWords(rng, 1+rng.IntN(3)), Observation: wlWords(rng, 2+rng.IntN(4)),
		Reward: float64(rng.IntN(3)) / 2}
	na := 2 + rng.IntN(6)
	t.ActionTokens = make([]uint32, na)
	t.ActionLogprobs = make([]float32, na)
	for j := range na {
		t.ActionTokens[j] = rng.Uint32N(50000)
		t.ActionLogprobs[j] = -rng.Float32() * 4
	}
	t.ObservationTokens = make([]uint32, 4+rng.IntN(8))
	for j := range t.ObservationTokens {
		t.ObservationTokens[j] = rng.Uint32N(50000)
	}
	return t
}

// committedTxs returns the transaction numbers whose markers the file
// holds, in log order across runs. A healthy file holds exactly 1..C.
func committedTxs(db *store.DB) ([]uint64, error) {
	var out []uint64
	err := db.View(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, err := tx.Run(id)
			if err != nil {
				return err
			}
			if err := r.Events(1, func(e model.Event) error {
				if e.Kind != evTxMarker {
					return nil
				}
				var p []uint64
				if err := store.DecodePayload(e, &p); err != nil {
					return err
				}
				if len(p) != 2 {
					return fmt.Errorf("marker event %d has payload %v", e.Seq, p)
				}
				out = append(out, p[0])
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func lastTx(db *store.DB) (uint64, error) {
	txs, err := committedTxs(db)
	if err != nil || len(txs) == 0 {
		return 0, err
	}
	return txs[len(txs)-1], nil
}

// runFinished reports whether the file's last run is finished.
func runFinished(db *store.DB) (bool, error) {
	var done bool
	err := db.View(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		if err != nil || len(ids) == 0 {
			return err
		}
		r, err := tx.Run(ids[len(ids)-1])
		if err != nil {
			return err
		}
		info, err := r.Info()
		done = info.Status == model.RunFinished
		return err
	})
	return done, err
}

// diffFiles compares two bbolt files bucket by bucket: every key, every
// value byte and every bucket sequence. It returns the first difference.
func diffStores(a, b *bolt.DB) error {
	return a.View(func(ta *bolt.Tx) error {
		return b.View(func(tb *bolt.Tx) error {
			return diffBucketCursors("", ta.Cursor(), tb.Cursor(), ta.Bucket, tb.Bucket)
		})
	})
}

func diffBucketCursors(path string, ca, cb *bolt.Cursor, ba, bb func([]byte) *bolt.Bucket) error {
	ka, va := ca.First()
	kb, vb := cb.First()
	for ka != nil || kb != nil {
		switch {
		case kb == nil || (ka != nil && bytes.Compare(ka, kb) < 0):
			return fmt.Errorf("%s: key %x only in the crashed file", path, ka)
		case ka == nil || bytes.Compare(ka, kb) > 0:
			return fmt.Errorf("%s: key %x missing from the crashed file", path, kb)
		case (va == nil) != (vb == nil):
			return fmt.Errorf("%s: key %x is a bucket in one file and a value in the other", path, ka)
		case va == nil:
			sa, sb := ba(ka), bb(kb)
			if sa.Sequence() != sb.Sequence() {
				return fmt.Errorf("%s/%s: sequence %d, want %d", path, ka, sa.Sequence(), sb.Sequence())
			}
			if err := diffBucketCursors(path+"/"+string(ka), sa.Cursor(), sb.Cursor(), sa.Bucket, sb.Bucket); err != nil {
				return err
			}
		case !bytes.Equal(va, vb):
			return fmt.Errorf("%s: value of key %x differs:\n got %x\nwant %x", path, ka, va, vb)
		}
		ka, va = ca.Next()
		kb, vb = cb.Next()
	}
	return nil
}

// ---------------------------------------------------------------------------
// The child.

const (
	envChild    = "PATRDB_CRASH_CHILD"    // "1" selects the child role
	envDB       = "PATRDB_CRASH_DB"       // the file the child writes
	envSeed     = "PATRDB_CRASH_SEED"     // workload seed (child) / master seed (parent)
	envPoint    = "PATRDB_CRASH_POINT"    // named crash point
	envHit      = "PATRDB_CRASH_HIT"      // crash at this hit of the point (1-based)
	envMaxTx    = "PATRDB_CRASH_MAXTX"    // child stops after this many transactions
	envUntil    = "PATRDB_CRASH_UNTIL"    // "finish": child stops when the run is finished
	envIters    = "PATRDB_CRASH_ITERS"    // parent: kills in total
	envKeep     = "PATRDB_CRASH_KEEP"     // parent: keep every epoch's directory
	envReverify = "PATRDB_CRASH_REVERIFY" // TestCrashReverify: directory kept by a failure
)

// crashPoints are the named places a child can kill itself. "recovery"
// lies inside a writer's first transaction (the recovery write), the
// in-transaction points between the steps of an interval, a group close
// and a rubric move, "precommit" after the last write before Commit, and
// "postcommit"/"postack" around the acknowledgement.
var crashPoints = []string{"recovery", "turns", "score", "route", "children", "close", "rubric", "precommit", "postcommit", "postack"}

func TestCrashChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("the crash-loop child; TestCrashLoop runs it")
	}
	if err := crashChild(); err != nil {
		fmt.Fprintf(os.Stderr, "crash child: %v\n", err)
		t.Fatal(err)
	}
}

func crashChild() error {
	seed, err := strconv.ParseUint(os.Getenv(envSeed), 10, 64)
	if err != nil {
		return fmt.Errorf("%s: %v", envSeed, err)
	}
	point := os.Getenv(envPoint)
	hitAt, _ := strconv.Atoi(os.Getenv(envHit))
	maxTx, _ := strconv.Atoi(os.Getenv(envMaxTx))
	untilFinish := os.Getenv(envUntil) == "finish"
	hits := 0
	hook := func(p string) {
		if p != point {
			return
		}
		if hits++; hits == hitAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns: the signal is on its way
		}
	}
	w := newWorkload(seed, hook)
	db, err := store.Open(os.Getenv(envDB), w.options(false))
	if err != nil {
		return err
	}
	c, err := lastTx(db)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "ready %d\n", c)
	for n := 0; maxTx == 0 || n < maxTx; n++ {
		if untilFinish && n > 0 {
			done, err := runFinished(db)
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
		i := c + 1
		// "begin" lets the parent tell where its kill landed.
		if _, err := fmt.Fprintf(os.Stdout, "begin %d\n", i); err != nil {
			return err
		}
		if err := w.apply(db, i, n == 0); err != nil {
			return fmt.Errorf("transaction %d: %w", i, err)
		}
		hook("postcommit")
		// os.Stdout is unbuffered: the line is in the pipe when Write returns.
		if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", i); err != nil {
			return err
		}
		hook("postack")
		c = i
	}
	return db.Close()
}

// ---------------------------------------------------------------------------
// The parent.

// crashStats are the counts RELIABILITY.md reports.
type crashStats struct {
	kills, timed, early, points, clean  int
	acked, committed, inflightCommitted int
	lost                                int // acknowledged transactions missing: must stay 0
	pointHits                           map[string]int
	landed                              map[string]int // where kills landed
}

func (s *crashStats) String() string {
	pts := make([]string, 0, len(s.pointHits))
	for _, p := range crashPoints {
		if s.pointHits[p] > 0 {
			pts = append(pts, fmt.Sprintf("%s=%d", p, s.pointHits[p]))
		}
	}
	var landed []string
	for _, k := range slices.Sorted(maps.Keys(s.landed)) {
		landed = append(landed, fmt.Sprintf("%s: %d", k, s.landed[k]))
	}
	return fmt.Sprintf("children=%d (timed kills %d, early kills %d, named-point kills %d [%s], clean exits %d); "+
		"kills landed [%s]; transactions acked %d, committed %d, in-flight committed %d; acknowledged lost %d",
		s.kills+s.clean, s.timed, s.early, s.points, strings.Join(pts, " "), s.clean, strings.Join(landed, "; "),
		s.acked, s.committed, s.inflightCommitted, s.lost)
}

func TestCrashLoop(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("inside a crash child")
	}
	iters := 200
	if testing.Short() {
		iters = 20
	}
	if v := os.Getenv(envIters); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", envIters, v)
		}
		iters = n
	}
	master := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if master, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
	}
	t.Logf("crash loop: %d kills, master seed %d (rerun: %s=%d %s=%d go test -run 'TestCrashLoop$' ./store/)",
		iters, master, envSeed, master, envIters, iters)
	// An epoch is one file written by a chain of children; a fresh file
	// every epochLen kills keeps the per-kill verification cost flat.
	const epochLen = 50
	stats := &crashStats{pointHits: map[string]int{}, landed: map[string]int{}}
	start := time.Now()
	for e, done := 0, 0; done < iters && !t.Failed(); e++ {
		n := min(epochLen, iters-done)
		runEpoch(t, master+uint64(e), n, stats)
		done += n
	}
	t.Logf("crash loop: %s; %v", stats, time.Since(start).Round(time.Millisecond))
	if stats.lost != 0 {
		t.Errorf("%d acknowledged transactions lost", stats.lost)
	}
	// Every plan must really have happened: a loop whose children all exit
	// before the kill proves nothing.
	if stats.kills < iters*3/4 {
		t.Errorf("only %d of %d children were killed", stats.kills, iters)
	}
}

// epoch is the parent's record of one file.
type crashEpoch struct {
	t       *testing.T
	seed    uint64
	dir     string
	path    string
	log     *os.File
	ref     *store.DB // reference store advanced by in-process replay
	refW    *workload
	refC    uint64
	c       uint64   // committed transactions after the last verification
	resumes []uint64 // transaction numbers that were a child's first
	rng     *rand.Rand
	txDur   time.Duration // moving average time between acks
	startup time.Duration // moving average exec-to-ready time
}

func runEpoch(t *testing.T, seed uint64, kills int, stats *crashStats) {
	dir, err := os.MkdirTemp("", "patrdb-crash-")
	if err != nil {
		t.Fatal(err)
	}
	ep := &crashEpoch{t: t, seed: seed, dir: dir, path: filepath.Join(dir, "patr.db"),
		rng: rand.New(rand.NewPCG(seed, 0xC4A5)), txDur: 2 * time.Millisecond, startup: 50 * time.Millisecond}
	if ep.log, err = os.Create(filepath.Join(dir, "acks.log")); err != nil {
		t.Fatal(err)
	}
	ep.logf("seed %d", seed)
	ep.refW = newWorkload(seed, nil)
	ep.ref, err = store.Open(filepath.Join(t.TempDir(), "ref.db"), ep.refW.options(true))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = ep.ref.Close()
		_ = ep.log.Close()
		if t.Failed() {
			t.Logf("crash loop FAILED in epoch seed %d; kept %s (patr.db = the file, acks.log = plans, acks and verifications).\n"+
				"  re-verify the kept file: %s=%s go test -run 'TestCrashReverify$' -v ./store/\n"+
				"  rerun this epoch (kill timing differs, named points repeat): %s=%d %s=%d go test -run 'TestCrashLoop$' -v ./store/",
				seed, dir, envReverify, dir, envSeed, seed, envIters, kills)
			return
		}
		if os.Getenv(envKeep) == "" {
			_ = os.RemoveAll(dir)
		}
	}()
	for k := 0; k < kills && !t.Failed(); k++ {
		ep.child(k, false, stats)
	}
	if t.Failed() {
		return
	}
	// The next writer continues: a last child without a kill finishes the
	// run it finds.
	ep.child(kills, true, stats)
	if t.Failed() {
		return
	}
	db, err := store.Open(ep.path, &store.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("epoch %d: open after the final child: %v", seed, err)
	}
	defer db.Close()
	if done, err := runFinished(db); err != nil || !done {
		t.Errorf("epoch %d: the final child did not finish the run (finished=%t, err=%v)", seed, done, err)
	}
}

func (ep *crashEpoch) logf(format string, args ...any) {
	fmt.Fprintf(ep.log, format+"\n", args...)
}

type crashPlan struct {
	kind  string // "timed", "early", "point" or "clean"
	point string
	hit   int
	delay time.Duration // timed: after the child is ready; early: after exec
}

func (ep *crashEpoch) plan(k int, final bool) crashPlan {
	switch {
	case final:
		return crashPlan{kind: "clean"}
	case k%4 == 3:
		// Named points in turn, so each is exercised every 40 kills; the
		// hit number moves the point to a later logical write.
		p := crashPoints[(k/4)%len(crashPoints)]
		hit := 1 + ep.rng.IntN(3)
		if p == "recovery" {
			hit = 1 // a writer makes one recovery write
		}
		return crashPlan{kind: "point", point: p, hit: hit}
	case k%8 == 1:
		// During exec, Open or the recovery write.
		return crashPlan{kind: "early", delay: time.Duration(ep.rng.Int64N(int64(ep.startup + 2*ep.txDur)))}
	default:
		// Uniform over the first few transactions' time, so kills land
		// where a writer spends its time: building and committing.
		span := time.Duration(1+ep.rng.IntN(4)) * ep.txDur
		return crashPlan{kind: "timed", delay: time.Duration(ep.rng.Int64N(int64(span) + 1))}
	}
}

type childLine struct {
	text string
	at   time.Time
}

// child runs one writer, kills it according to its plan, and verifies
// what it left.
func (ep *crashEpoch) child(k int, final bool, stats *crashStats) {
	t := ep.t
	p := ep.plan(k, final)
	ep.logf("child %d prevC=%d plan=%s point=%s hit=%d delay=%v", k, ep.c, p.kind, p.point, p.hit, p.delay)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envDB+"="+ep.path, fmt.Sprintf("%s=%d", envSeed, ep.seed),
		envPoint+"="+p.point, fmt.Sprintf("%s=%d", envHit, p.hit))
	switch p.kind {
	case "clean":
		cmd.Env = append(cmd.Env, envUntil+"=finish")
	case "point":
		cmd.Env = append(cmd.Env, envMaxTx+"=200")
	default:
		cmd.Env = append(cmd.Env, envMaxTx+"=40")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan childLine, 256)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- childLine{sc.Text(), time.Now()}
		}
		close(lines)
	}()
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL) }) }
	var timer *time.Timer
	if p.kind == "early" {
		timer = time.AfterFunc(p.delay, kill)
	}
	// A child that hangs fails the test instead of the whole run.
	watchdog := time.AfterFunc(2*time.Minute, func() {
		t.Errorf("child %d hung; killing it", k)
		kill()
	})
	var acks []uint64
	var begun uint64
	var ready, lastAckAt time.Time
	for l := range lines {
		f := strings.Fields(l.text)
		if len(f) != 2 || (f[0] != "ready" && f[0] != "ack" && f[0] != "begin") {
			continue // the testing package's own output
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			t.Errorf("child %d: bad line %q", k, l.text)
			continue
		}
		if f[0] == "begin" {
			begun = n
			continue
		}
		ep.logf("%s %d", f[0], n)
		if f[0] == "ready" {
			ready = l.at
			ep.startup = (ep.startup*3 + l.at.Sub(started)) / 4
			if n != ep.c {
				t.Errorf("child %d found transaction %d committed, the parent verified %d", k, n, ep.c)
			}
			if p.kind == "timed" {
				timer = time.AfterFunc(p.delay, kill)
			}
		} else {
			acks = append(acks, n)
			lastAckAt = l.at
		}
	}
	// The time per transaction, from this child's whole run: lines arrive
	// in bursts, so gaps between two of them mean nothing.
	if len(acks) >= 3 && !ready.IsZero() {
		ep.txDur = (ep.txDur*3 + lastAckAt.Sub(ready)/time.Duration(len(acks))) / 4
	}
	werr := cmd.Wait()
	watchdog.Stop()
	if timer != nil {
		timer.Stop()
	}
	killed := false
	if ee, ok := werr.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	switch {
	case killed:
		stats.kills++
		ep.logf("exit: killed")
		switch p.kind {
		case "timed":
			stats.timed++
		case "early":
			stats.early++
		case "point":
			stats.points++
			stats.pointHits[p.point]++
		}
	case werr != nil:
		ep.logf("exit: %v", werr)
		t.Fatalf("child %d (%s) failed: %v\n%s", k, p.kind, werr, stderr.Bytes())
	default:
		stats.clean++
		ep.logf("exit: clean")
		if p.kind != "clean" && p.kind != "point" {
			// The child ran out of work before the kill: still verified.
			ep.logf("note: child finished before its kill")
		}
	}
	acked := ep.c // committed before this child
	c := ep.verify(k, acks, stats)
	stats.acked += len(acks)
	if killed {
		// Where the kill landed, as far as the parent can tell.
		if len(acks) > 0 {
			acked = acks[len(acks)-1]
		}
		switch {
		case ready.IsZero():
			stats.landed["before Open returned"]++
		case begun <= acked:
			stats.landed["between transactions"]++
		case c > acked:
			stats.landed["after commit, before the ack"]++
		default:
			stats.landed["inside a transaction (rolled back)"]++
		}
	}
}

// verify opens what a child left and checks it against the acks and the
// reference replay.
// verify returns the number of committed transactions it found.
func (ep *crashEpoch) verify(k int, acks []uint64, stats *crashStats) uint64 {
	t := ep.t
	prev := ep.c
	want := prev
	for _, a := range acks {
		if a != want+1 {
			t.Fatalf("child %d acknowledged %d after %d", k, a, want)
		}
		want = a
	}
	db, err := store.Open(ep.path, &store.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("child %d: reopen after kill: %v", k, err)
	}
	defer db.Close()
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("child %d: check: %v", k, err)
	}
	for _, v := range vs {
		t.Errorf("child %d: check: %s", k, v)
	}
	txs, err := committedTxs(db)
	if err != nil {
		t.Fatalf("child %d: reading transaction markers: %v", k, err)
	}
	for j, i := range txs {
		if i != uint64(j+1) {
			t.Fatalf("child %d: transaction markers %v are not 1..n", k, txs)
		}
	}
	c := uint64(len(txs))
	ep.logf("verify C=%d lastAck=%d", c, want)
	switch {
	case c < prev:
		t.Fatalf("child %d: committed transactions went back from %d to %d", k, prev, c)
	case c < want:
		t.Fatalf("child %d: LOST acknowledged transactions %d..%d (file has %d)", k, c+1, want, c)
	case c > want+1:
		t.Fatalf("child %d: file has %d transactions, at most %d can have committed", k, c, want+1)
	}
	// Replay what committed into the reference and compare every byte.
	if c > prev {
		ep.resumes = append(ep.resumes, prev+1)
	}
	for ep.refC < c {
		i := ep.refC + 1
		if err := ep.refW.apply(ep.ref, i, i == prev+1); err != nil {
			t.Fatalf("reference replay of transaction %d: %v", i, err)
		}
		ep.refC = i
	}
	if err := diffStores(storetest.Bolt(db), storetest.Bolt(ep.ref)); err != nil {
		t.Fatalf("child %d: the file differs from the replay of transactions 1..%d: %v", k, c, err)
	}
	stats.committed += int(c - prev)
	if c == want+1 {
		stats.inflightCommitted++
	}
	ep.c = c
	return c
}

// TestCrashReverify re-checks a directory a failed crash loop kept: it
// replays the seed with the recorded resume points and diffs the file.
func TestCrashReverify(t *testing.T) {
	dir := os.Getenv(envReverify)
	if dir == "" {
		t.Skip("set " + envReverify + " to a directory a failed TestCrashLoop kept")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "acks.log"))
	if err != nil {
		t.Fatal(err)
	}
	var seed, lastAck uint64
	var resumes []uint64
	for _, l := range strings.Split(string(raw), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "seed":
			seed, _ = strconv.ParseUint(f[1], 10, 64)
		case len(f) >= 3 && f[0] == "child":
			prev, _ := strconv.ParseUint(strings.TrimPrefix(f[2], "prevC="), 10, 64)
			if len(resumes) == 0 || resumes[len(resumes)-1] != prev+1 {
				resumes = append(resumes, prev+1)
			}
		case len(f) == 2 && f[0] == "ack":
			lastAck, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	db, err := store.Open(filepath.Join(dir, "patr.db"), &store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer db.Close()
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("check: %s", v)
	}
	c, err := lastTx(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: file has %d transactions, last ack %d, resumes at %v", seed, c, lastAck, resumes)
	if c < lastAck {
		t.Errorf("acknowledged transactions %d..%d are missing", c+1, lastAck)
	}
	w := newWorkload(seed, nil)
	ref, err := store.Open(filepath.Join(t.TempDir(), "ref.db"), w.options(true))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := uint64(1); i <= c; i++ {
		if err := w.apply(ref, i, slices.Contains(resumes, i)); err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
	}
	if err := diffStores(storetest.Bolt(db), storetest.Bolt(ref)); err != nil {
		t.Errorf("file differs from the replay: %v", err)
	}
}
