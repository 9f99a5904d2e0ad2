package rubricpool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The fakes stand in for the trainer's LLMs. They are deterministic
// functions of their inputs, as a replayed run needs: trajectories carry
// "features" (key=value pairs in their first turn's observation), the judge
// compares a rubric's feature, the inducer drafts rubrics about the
// features that separate the anchors, the consolidator merges drafts by
// feature.

// lowerIsBetter lists the features where a smaller value wins.
var lowerIsBetter = map[string]bool{"revisits": true}

func parseFeatures(turns []model.PathTurn) map[string]float64 {
	out := map[string]float64{}
	if len(turns) == 0 {
		return out
	}
	for _, kv := range strings.Fields(turns[0].Observation) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			out[k] = x
		}
	}
	return out
}

// goodness is a feature's value signed so that larger is better.
func goodness(f map[string]float64, feature string) (float64, bool) {
	v, ok := f[feature]
	if lowerIsBetter[feature] {
		v = -v
	}
	return v, ok
}

// featureJudge compares the rubric's feature; a missing feature or a
// difference under 1e-9 is a tie. It logs every call it gets.
type featureJudge struct {
	mu    sync.Mutex
	calls []judgeCall
	// override, when set, answers instead (for invalid outputs).
	override func(rb model.Rubric, a, b Trajectory) (Outcome, error)
}

type judgeCall struct {
	Rubric  uint64
	Feature string
	A, B    uint64 // as shown
}

func (j *featureJudge) Judge(_ context.Context, rb model.Rubric, a, b Trajectory) (Outcome, error) {
	j.mu.Lock()
	j.calls = append(j.calls, judgeCall{Rubric: rb.ID, Feature: rb.Feature, A: a.Node, B: b.Node})
	j.mu.Unlock()
	if j.override != nil {
		return j.override(rb, a, b)
	}
	va, okA := goodness(parseFeatures(a.Turns), rb.Feature)
	vb, okB := goodness(parseFeatures(b.Turns), rb.Feature)
	switch {
	case !okA || !okB || va-vb < 1e-9 && vb-va < 1e-9:
		return Tie, nil
	case va > vb:
		return AWins, nil
	}
	return BWins, nil
}

func (j *featureJudge) reset() []judgeCall {
	j.mu.Lock()
	defer j.mu.Unlock()
	c := j.calls
	j.calls = nil
	return c
}

// Draft wordings per feature. Variant 0 and 1 normalise to the same text
// (a near-duplicate); variant 2 is worded differently enough to be a new
// candidate about the same feature.
var draftPhrase = map[string][2]string{
	"progress": {"gets closer to the answer before it stops", "A good trajectory keeps moving toward the answer and never stalls near the start"},
	"revisits": {"revisits fewer of the states it has already seen", "A good trajectory explores new states instead of circling back over old ones"},
	"format":   {"ends with a well formed answer line", "A good trajectory finishes by writing its answer in the expected format"},
	"noise":    {"uses an even number of words in its reasoning", "A good trajectory keeps its reasoning to a tidy word count whatever it finds"},
}

func draftText(feature string, variant int) string {
	p := draftPhrase[feature]
	switch variant {
	case 0:
		return "Prefer the trajectory that " + p[0] + "."
	case 1:
		return "PREFER the trajectory that " + strings.ToUpper(p[0]) + "!"
	}
	return p[1]
}

// publicText is the consolidator's canonical rubric for a feature.
func publicText(feature string) string {
	return "General rubric on " + feature + ": the better trajectory is the one whose " + feature + " signal is stronger"
}

// featureInducer drafts a rubric for every feature on which tau+ beats
// tau-worst or tau-hard by at least 0.2, in feature order, wording chosen
// by (step + group) so that near-duplicates and rewordings both occur.
type featureInducer struct {
	mu    sync.Mutex
	calls int
}

func (f *featureInducer) Induce(_ context.Context, in InduceInput) ([]model.Draft, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	best, worst, hard := parseFeatures(in.Best.Turns), parseFeatures(in.Worst.Turns), parseFeatures(in.Hard.Turns)
	var out []model.Draft
	for _, feat := range slices.Sorted(maps.Keys(draftPhrase)) {
		b, ok := goodness(best, feat)
		if !ok {
			continue
		}
		w, _ := goodness(worst, feat)
		h, _ := goodness(hard, feat)
		if b-w >= 0.2 || b-h >= 0.2 {
			out = append(out, model.Draft{Text: draftText(feat, int((in.Step+in.Group.ID)%3)), Feature: feat})
		}
	}
	return out, nil
}

// featureConsolidator writes one canonical public rubric per feature of the
// drafts, absorbing every draft about it; drafts without a feature are left
// out (and so dropped).
type featureConsolidator struct {
	mu    sync.Mutex
	calls int
	// override, when set, answers instead.
	override func(drafts, public []model.Rubric) ([]model.Consolidated, error)
}

func (f *featureConsolidator) Consolidate(_ context.Context, drafts, public []model.Rubric) ([]model.Consolidated, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	if f.override != nil {
		return f.override(drafts, public)
	}
	by := map[string][]uint64{}
	for _, d := range drafts {
		if d.Feature != "" {
			by[d.Feature] = append(by[d.Feature], d.ID)
		}
	}
	var out []model.Consolidated
	for _, feat := range slices.Sorted(maps.Keys(by)) {
		out = append(out, model.Consolidated{Text: publicText(feat), Feature: feat, Absorbs: by[feat]})
	}
	return out, nil
}

type inducerFunc func(in InduceInput) ([]model.Draft, error)

func (f inducerFunc) Induce(_ context.Context, in InduceInput) ([]model.Draft, error) { return f(in) }

// noDrafts is an inducer that never proposes anything.
var noDrafts = inducerFunc(func(InduceInput) ([]model.Draft, error) { return nil, nil })

// --- store helpers ---------------------------------------------------------

const testRun = "r1"

// tr describes one trajectory of a test group.
type tr struct {
	reward, outcome float64
	feats           string // "progress=0.5 revisits=0.2"
}

func newTestDB(t testing.TB) *store.DB {
	t.Helper()
	db := storetest.Open(t)
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(testRun, []byte(`{}`), nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return db
}

func newTestPool(t testing.TB, db *store.DB, cfg Config, ind Inducer, con Consolidator, j Judge) *Pool {
	t.Helper()
	p, err := New(db, testRun, cfg, ind, con, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// addGroup stores a group of completed root branches, one per tr, with
// rewards set, and returns it with the pool's view of its trajectories
// (sorted by node id, as the tree engine hands them over).
func addGroup(t testing.TB, db *store.DB, step uint64, trs []tr) (model.Group, []Trajectory) {
	t.Helper()
	var g model.Group
	var out []Trajectory
	err := db.UpdateRun(testRun, func(r *store.RunTx) error {
		var err error
		if g, err = r.OpenGroup(store.GroupSpec{Step: step, Task: "t", Gold: "gold"}); err != nil {
			return err
		}
		for i, x := range trs {
			n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(n.ID, 0, model.Turn{Action: "look", Observation: x.feats}); err != nil {
				return err
			}
			if err := r.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
				return err
			}
			if err := r.SetReward(n.ID, x.reward); err != nil {
				return err
			}
			turns, err := r.Trajectory(n.ID)
			if err != nil {
				return err
			}
			out = append(out, Trajectory{Node: n.ID, Reward: x.reward, Outcome: x.outcome, Turns: turns})
		}
		g, err = r.GroupAt(step, g.ID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, out
}

// seed writes rubrics directly (as an operator seeding a public pool
// would) and returns them with their ids.
func seed(t testing.TB, db *store.DB, rbs ...model.Rubric) []model.Rubric {
	t.Helper()
	out := make([]model.Rubric, len(rbs))
	err := db.UpdateRun(testRun, func(r *store.RunTx) error {
		var err error
		for i, rb := range rbs {
			if out[i], err = r.PutRubric(rb); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func public(text, feature string) model.Rubric {
	return model.Rubric{Pool: model.PoolPublic, Text: text, Feature: feature, Support: 1, Usage: model.RubricUsage{LastActivation: -1}}
}

func candidate(text, feature string) model.Rubric {
	r := public(text, feature)
	r.Pool = model.PoolCandidate
	return r
}

// applyGroup applies res and writes the group's advantages and close in
// one transaction, as the tree engine does.
func applyGroup(t *testing.T, db *store.DB, res *GroupResult, trajs []Trajectory) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error { return commitGroup(tx, res, trajs) }); err != nil {
		t.Fatal(err)
	}
}

func commitGroup(tx *store.Tx, res *GroupResult, trajs []Trajectory) error {
	r, err := tx.Run(testRun)
	if err != nil {
		return err
	}
	if err := res.Apply(r); err != nil {
		return err
	}
	base := make([]float64, len(trajs))
	for i, x := range trajs {
		base[i] = x.Reward
	}
	total := grpo.Shape(base, res.Scores, res.Lambda)
	a := grpo.Advantages(total, 1e-6)
	for i, x := range trajs {
		if err := r.PutAdvantage(model.Advantage{
			Step: res.Step, Group: res.Group, Leaf: x.Node, Outcome: x.Reward, RubricScore: res.Scores[i],
			Lambda: res.Lambda, Total: total[i], Mean: a.Mean, Std: a.Std, Advantage: a.Adv[i],
			Rubrics: res.Rubrics, ZeroVariance: res.ZeroVariance, ZeroVarianceAfter: res.ZeroVarianceAfter,
		}); err != nil {
			return err
		}
	}
	return r.CloseGroup(res.Step, res.Group)
}

func allRubrics(t *testing.T, db *store.DB) []model.Rubric {
	t.Helper()
	var out []model.Rubric
	if err := db.ViewRun(testRun, func(r *store.RunTx) error {
		var err error
		out, err = r.Rubrics("")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func rubricByID(t *testing.T, db *store.DB, id uint64) model.Rubric {
	t.Helper()
	for _, rb := range allRubrics(t, db) {
		if rb.ID == id {
			return rb
		}
	}
	t.Fatalf("rubric %d not found", id)
	return model.Rubric{}
}

func lastSeq(t *testing.T, db *store.DB) uint64 {
	t.Helper()
	var seq uint64
	if err := db.ViewRun(testRun, func(r *store.RunTx) error {
		seq = r.LastSeq()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return seq
}

// eventsOf returns the run's events of a kind ("" for all).
func eventsOf(t *testing.T, db *store.DB, kind model.EventKind) []model.Event {
	t.Helper()
	var out []model.Event
	if err := db.ViewRun(testRun, func(r *store.RunTx) error {
		return r.Events(1, func(e model.Event) error {
			if kind == "" || e.Kind == kind {
				out = append(out, e)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func decode[T any](t *testing.T, e model.Event) T {
	t.Helper()
	var v T
	if err := store.DecodePayload(e, &v); err != nil {
		t.Fatalf("event %d (%s): %v", e.Seq, e.Kind, err)
	}
	return v
}

func feats(kv ...any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%v=%v ", kv[i], kv[i+1])
	}
	return b.String()
}
