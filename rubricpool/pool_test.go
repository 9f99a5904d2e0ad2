package rubricpool

import (
	"context"
	"errors"
	"github.com/patrdb/patrdb/model"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/store"
)

var ctx = context.Background()

func TestNewValidates(t *testing.T) {
	db := newTestDB(t)
	j, ind, con := &featureJudge{}, &featureInducer{}, &featureConsolidator{}
	bad := DefaultConfig()
	bad.Active = 0
	if _, err := New(db, testRun, bad, ind, con, j, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad config: %v", err)
	}
	if _, err := New(db, testRun, DefaultConfig(), ind, con, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil judge: %v", err)
	}
	if _, err := New(nil, testRun, DefaultConfig(), ind, con, j, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil db: %v", err)
	}
	if _, err := New(db, "nope", DefaultConfig(), ind, con, j, nil); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
}

func TestF1Outcome(t *testing.T) {
	g := model.Group{Gold: "The Eiffel Tower"}
	turns := []model.PathTurn{{Turn: model.Turn{Action: "search"}}, {Turn: model.Turn{Action: "eiffel tower!"}}}
	if got := F1Outcome(g, turns); got != 1 {
		t.Errorf("F1Outcome = %v, want 1 (last action, SQuAD normalisation)", got)
	}
	if got := F1Outcome(g, turns[:1]); got != 0 {
		t.Errorf("F1Outcome = %v, want 0", got)
	}
	if got := F1Outcome(g, nil); got != 0 {
		t.Errorf("no turns: %v, want 0", got)
	}
}

// Activation order across steps: the highest running correlation first,
// then least-recently-activated rotation; only rubrics that became public
// before the step are eligible; calling again for a begun step returns the
// same set and writes nothing.
func TestBeginStepActivationOrder(t *testing.T) {
	db := newTestDB(t)
	withCorr := func(rb model.Rubric, c Corr) model.Rubric { setCorr(&rb.Usage, c); return rb }
	rs := seed(t, db,
		withCorr(public("one", "a"), rhoMid),                                            // 1
		withCorr(public("two", "b"), rhoHigh),                                           // 2: the exploit pick
		withCorr(public("three", "c"), rhoLow),                                          // 3
		withCorr(public("four", "d"), rhoUndef),                                         // 4
		func() model.Rubric { r := public("five", "e"); r.CreatedStep = 3; return r }(), // 5: eligible from step 4
		candidate("six", "f"),                                                           // 6: never eligible
	)
	if rs[5].ID != 6 {
		t.Fatalf("seeded ids %v", rs)
	}
	p := newTestPool(t, db, DefaultConfig(), noDrafts, &featureConsolidator{}, &featureJudge{})
	steps := []struct {
		sel  []uint64 // selection order, as the event records it
		acts map[uint64]int
	}{
		{[]uint64{2, 1}, map[uint64]int{1: 1, 2: 1}},
		{[]uint64{2, 3}, map[uint64]int{2: 2, 3: 1}},
		{[]uint64{2, 4}, map[uint64]int{2: 3, 4: 1}},
		{[]uint64{2, 5}, map[uint64]int{2: 4, 5: 1}},
		{[]uint64{2, 1}, map[uint64]int{1: 2, 2: 5}},
		{[]uint64{2, 3}, map[uint64]int{3: 2, 2: 6}},
	}
	for i, st := range steps {
		step := uint64(i + 1)
		got, err := p.BeginStep(ctx, step)
		if err != nil {
			t.Fatal(err)
		}
		if want := slices.Sorted(slices.Values(st.sel)); !slices.Equal(got, want) {
			t.Fatalf("step %d: active %v, want %v", step, got, want)
		}
		seq := lastSeq(t, db)
		again, err := p.BeginStep(ctx, step)
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("step %d again: %v, %v; want %v", step, again, err, got)
		}
		if lastSeq(t, db) != seq {
			t.Fatalf("step %d: calling BeginStep again wrote events", step)
		}
		evs := eventsOf(t, db, EvActivate)
		if len(evs) != i+1 || evs[i].Step != step {
			t.Fatalf("step %d: %d activation events", step, len(evs))
		}
		if pl := decode[ActivatePayload](t, evs[i]); !slices.Equal(pl.Rubrics, st.sel) {
			t.Fatalf("step %d: event order %v, want %v", step, pl.Rubrics, st.sel)
		}
		for id, acts := range st.acts {
			u := rubricByID(t, db, id).Usage
			if u.Activations != acts || u.LastActivation != int64(step) {
				t.Fatalf("step %d: rubric %d usage %+v, want %d activations, last %d", step, id, u, acts, step)
			}
		}
	}
	if _, err := p.BeginStep(ctx, 3); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("going back to step 3: %v", err)
	}
	if _, err := p.BeginStep(ctx, 0); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("step 0: %v", err)
	}
}

// A step that begins with nothing eligible stays empty even when rubrics
// become public during it: they wait for the next step.
func TestBeginStepEmptyStaysEmpty(t *testing.T) {
	db := newTestDB(t)
	p := newTestPool(t, db, DefaultConfig(), noDrafts, &featureConsolidator{}, &featureJudge{})
	if ids, err := p.BeginStep(ctx, 1); err != nil || ids != nil {
		t.Fatalf("empty pool: %v, %v", ids, err)
	}
	late := public("consolidated at step 1", "x")
	late.CreatedStep = 1
	seed(t, db, late)
	if ids, err := p.BeginStep(ctx, 1); err != nil || ids != nil {
		t.Fatalf("step 1 again after a rubric went public: %v, %v", ids, err)
	}
	if got := len(eventsOf(t, db, EvActivate)); got != 0 {
		t.Fatalf("%d activation events for empty steps", got)
	}
	if ids, err := p.BeginStep(ctx, 2); err != nil || !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("step 2: %v, %v", ids, err)
	}
}

func TestPrepareNeedsBeginStep(t *testing.T) {
	db := newTestDB(t)
	seed(t, db, public("prefers progress", "progress"))
	p := newTestPool(t, db, DefaultConfig(), noDrafts, &featureConsolidator{}, &featureJudge{})
	g, trajs := addGroup(t, db, 1, []tr{{0, 0, ""}, {1, 1, ""}})
	if _, err := p.Prepare(ctx, 1, g, trajs); !errors.Is(err, ErrStepNotBegun) {
		t.Fatalf("Prepare before BeginStep: %v", err)
	}
}

// The pair set: neighbours in base-reward order plus the diameter, never
// more than |G| judge calls per rubric, A/B order exactly as Swap says.
func TestPairSetJudgeCalls(t *testing.T) {
	for n := 2; n <= 9; n++ {
		db := newTestDB(t)
		seed(t, db, public("prefers progress", "progress"))
		j := &featureJudge{}
		cfg := DefaultConfig()
		cfg.Seed = int64(n) * 7919
		p := newTestPool(t, db, cfg, noDrafts, &featureConsolidator{}, j)
		if _, err := p.BeginStep(ctx, 1); err != nil {
			t.Fatal(err)
		}
		// Rewards out of node order, with a tie (broken by node id).
		trs := make([]tr, n)
		for i := range trs {
			r := float64((i*5)%n) / float64(n)
			if i == n-1 && n > 2 {
				r = trs[0].reward
			}
			trs[i] = tr{reward: r, outcome: r, feats: feats("progress", (i*3)%4)}
		}
		g, trajs := addGroup(t, db, 1, trs)
		res, err := p.Prepare(ctx, 1, g, trajs)
		if err != nil {
			t.Fatal(err)
		}
		calls := j.reset()
		if len(calls) > n || len(calls) != res.JudgeCalls {
			t.Fatalf("n=%d: %d judge calls (result says %d)", n, len(calls), res.JudgeCalls)
		}
		// The expected plan, computed by hand: sort by (reward, node).
		order := make([]Trajectory, n)
		copy(order, trajs)
		slices.SortFunc(order, func(a, b Trajectory) int {
			if a.Reward != b.Reward {
				return map[bool]int{true: -1, false: 1}[a.Reward < b.Reward]
			}
			return int(a.Node) - int(b.Node)
		})
		var want [][2]uint64
		for i := 0; i+1 < n; i++ {
			want = append(want, [2]uint64{order[i].Node, order[i+1].Node})
		}
		if n > 2 {
			want = append(want, [2]uint64{order[0].Node, order[n-1].Node})
		}
		if len(calls) != len(want) {
			t.Fatalf("n=%d: %d calls, want %d", n, len(calls), len(want))
		}
		for k, c := range calls {
			a, b := want[k][0], want[k][1]
			swapped := Swap(cfg.Seed, 1, g.ID, 1, a, b)
			shown := [2]uint64{a, b}
			if swapped {
				shown = [2]uint64{b, a}
			}
			if [2]uint64{c.A, c.B} != shown || c.Rubric != 1 {
				t.Fatalf("n=%d call %d: shown %d,%d under rubric %d; want %v (swapped %v)", n, k, c.A, c.B, c.Rubric, shown, swapped)
			}
		}
		var sum float64
		for _, s := range res.Scores {
			sum += s
		}
		if math.Abs(sum) > 1e-12 || !slices.Equal(res.Rubrics, []uint64{1}) || res.Lambda != cfg.Lambda {
			t.Fatalf("n=%d: scores %v (sum %v), rubrics %v, lambda %v", n, res.Scores, sum, res.Rubrics, res.Lambda)
		}
		applyGroup(t, db, res, trajs)
		if u := rubricByID(t, db, 1).Usage; u.PairsJudged != len(want) || u.N != float64(n) {
			t.Fatalf("n=%d: usage %+v", n, u)
		}
	}
}

// A group whose base rewards are all equal is unlocked when shaping
// separates it; the rubric that separated it gets the credit.
func TestUnlockedGroups(t *testing.T) {
	db := newTestDB(t)
	seed(t, db, public("prefers progress", "progress"), public("prefers nothing", "absent"))
	p := newTestPool(t, db, DefaultConfig(), noDrafts, &featureConsolidator{}, &featureJudge{})
	if _, err := p.BeginStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	g, trajs := addGroup(t, db, 1, []tr{{0, 0, "progress=0.1"}, {0, 0, "progress=0.9"}, {0, 0, "progress=0.5"}})
	res, err := p.Prepare(ctx, 1, g, trajs)
	if err != nil {
		t.Fatal(err)
	}
	if !res.ZeroVariance || res.ZeroVarianceAfter || !res.Unlocked {
		t.Fatalf("zero variance %v after %v unlocked %v", res.ZeroVariance, res.ZeroVarianceAfter, res.Unlocked)
	}
	if !(res.Scores[1] > res.Scores[2] && res.Scores[2] > res.Scores[0]) {
		t.Fatalf("scores %v do not follow progress", res.Scores)
	}
	applyGroup(t, db, res, trajs)
	if u := rubricByID(t, db, 1).Usage; u.GroupsUnlocked != 1 {
		t.Errorf("separating rubric unlocked %d groups", u.GroupsUnlocked)
	}
	if u := rubricByID(t, db, 2).Usage; u.GroupsUnlocked != 0 || u.LowVarStreak != 1 {
		t.Errorf("all-tie rubric: %+v", u)
	}
	advs := func() []model.Advantage {
		var a []model.Advantage
		_ = db.View(func(tx *store.Tx) error {
			r, _ := tx.Run(testRun)
			a, _ = r.Advantages(1, g.ID)
			return nil
		})
		return a
	}()
	if len(advs) != 3 || !advs[0].ZeroVariance || advs[0].ZeroVarianceAfter {
		t.Errorf("advantages %+v", advs)
	}
}

// Admission: variance ≥ VarMin and Pearson ≥ RhoMin, both inclusive; a
// rejection is recorded with its figures and creates nothing.
func TestAdmissionThresholds(t *testing.T) {
	group := []tr{
		{0.1, 0.1, "x=0.2 flat=1 anti=0.9"},
		{0.4, 0.4, "x=0.1 flat=1 anti=0.6"},
		{0.6, 0.6, "x=0.5 flat=1 anti=0.3"},
		{0.9, 0.9, "x=0.7 flat=1 anti=0.1"},
	}
	// The figures of feature x, computed from the pair plan by hand: pairs
	// (n1,n2) (n2,n3) (n3,n4) (n1,n4) in reward order; x wins: n1>n2,
	// n3>n2, n4>n3, n4>n1 → win rates n1 1/2, n2 0, n3 1/2, n4 1.
	wr := []float64{0.5, 0, 0.5, 1}
	v := grpo.Variance(wr)
	rho, _ := Pearson(wr, []float64{0.1, 0.4, 0.6, 0.9})
	up := func(x float64) float64 { return math.Nextafter(x, 2) }
	cases := []struct {
		name    string
		feature string
		varMin  float64
		rhoMin  float64
		admit   bool
		reason  string
	}{
		{"at both thresholds", "x", v, rho, true, ""},
		{"variance just below", "x", up(v), rho, false, "variance"},
		{"correlation just below", "x", v, up(rho), false, "rho"},
		{"constant scores", "flat", 0.01, 0.2, false, "variance 0 < VarMin 0.01"},
		{"anti-correlated", "anti", 0.01, 0.2, false, "rho -"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newTestDB(t)
			cfg := DefaultConfig()
			cfg.VarMin, cfg.RhoMin = c.varMin, c.rhoMin
			ind := inducerFunc(func(InduceInput) ([]model.Draft, error) {
				return []model.Draft{{Text: "judge by " + c.feature, Feature: c.feature}}, nil
			})
			j := &featureJudge{}
			p := newTestPool(t, db, cfg, ind, &featureConsolidator{}, j)
			if _, err := p.BeginStep(ctx, 1); err != nil {
				t.Fatal(err)
			}
			g, trajs := addGroup(t, db, 1, group)
			res, err := p.Prepare(ctx, 1, g, trajs)
			if err != nil {
				t.Fatal(err)
			}
			if calls := j.reset(); len(calls) != 4 || calls[0].Rubric != 0 {
				t.Fatalf("draft judged with %d calls (%+v)", len(calls), calls)
			}
			applyGroup(t, db, res, trajs)
			rbs := allRubrics(t, db)
			if c.admit {
				if len(rbs) != 1 || len(res.Admitted) != 1 || res.Rejected != 0 {
					t.Fatalf("not admitted: %+v / %+v", rbs, res)
				}
				rb := rbs[0]
				if rb.Pool != model.PoolCandidate || rb.Variance != v || rb.Rho != rho || rb.Support != 1 ||
					rb.CreatedStep != 1 || rb.Origin.Group != g.ID || len(rb.Origin.Anchors) != 3 || rb.Feature != "x" {
					t.Fatalf("admitted record %+v", rb)
				}
				// Anchors: tau+ = n4, tau-worst = n1, tau-hard = n3.
				if want := []uint64{trajs[3].Node, trajs[0].Node, trajs[2].Node}; !slices.Equal(rb.Origin.Anchors, want) {
					t.Fatalf("anchors %v, want %v", rb.Origin.Anchors, want)
				}
				ev := eventsOf(t, db, EvAdmit)
				if len(ev) != 1 || ev[0].Rubric != rb.ID {
					t.Fatalf("admit events %+v", ev)
				}
				return
			}
			if len(rbs) != 0 || res.Rejected != 1 {
				t.Fatalf("rejected draft left rubrics %+v", rbs)
			}
			ev := eventsOf(t, db, EvReject)
			if len(ev) != 1 {
				t.Fatalf("%d reject events", len(ev))
			}
			pl := decode[AdmissionPayload](t, ev[0])
			if !strings.Contains(pl.Reason, c.reason) || len(pl.Verdicts) != 4 || len(pl.WinRates) != 4 || pl.Text != "judge by "+c.feature {
				t.Fatalf("reject payload %+v, want reason containing %q", pl, c.reason)
			}
			if c.feature == "x" && (pl.Variance != v || pl.Rho != rho || !pl.RhoDefined) {
				t.Fatalf("figures %v %v, want %v %v", pl.Variance, pl.Rho, v, rho)
			}
		})
	}
}

// Near-duplicates of a candidate or public rubric, or of a draft admitted
// earlier in the same group, add support: no new rubric, no judge call.
func TestDedupAddsSupport(t *testing.T) {
	db := newTestDB(t)
	seed(t, db,
		candidate("Prefer the trajectory that gets closer to the goal before it stops moving", "progress"),
		public("Penalise every wall bump the agent makes while it walks to the goal", "bumps"),
	)
	drafts := []model.Draft{
		{Text: "PREFER the trajectory that gets closer to the goal, before it stops moving!", Feature: "progress"}, // same normalised text
		{Text: "Penalise every wall bump the agent makes while it walks to the exit", Feature: "bumps"},            // 10 of 12 shingles shared
		{Text: "Reward trajectories that visit fewer states twice", Feature: "x"},                                  // new
		{Text: "reward trajectories that visit fewer states twice.", Feature: "x"},                                 // duplicate of the one above
	}
	if j := Jaccard(drafts[1].Text, "Penalise every wall bump the agent makes while it walks to the goal"); j != 10.0/12 {
		t.Fatalf("test text Jaccard %v", j)
	}
	j := &featureJudge{}
	p := newTestPool(t, db, DefaultConfig(), inducerFunc(func(InduceInput) ([]model.Draft, error) { return drafts, nil }), &featureConsolidator{}, j)
	if _, err := p.BeginStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	g, trajs := addGroup(t, db, 1, []tr{{0, 0.1, "x=0.1"}, {0, 0.5, "x=0.5"}, {1, 0.9, "x=0.9"}})
	res, err := p.Prepare(ctx, 1, g, trajs)
	if err != nil {
		t.Fatal(err)
	}
	// The public rubric is active this step and judges the group too;
	// drafts are the calls with rubric id 0.
	var draftCalls []judgeCall
	for _, c := range j.reset() {
		if c.Rubric == 0 {
			draftCalls = append(draftCalls, c)
		}
	}
	for _, c := range draftCalls {
		if c.Feature != "x" {
			t.Fatalf("a near-duplicate was judged: %+v", c)
		}
	}
	if len(draftCalls) != 3 {
		t.Fatalf("%d draft judge calls, want 3 (one draft over a group of 3)", len(draftCalls))
	}
	applyGroup(t, db, res, trajs)
	rbs := allRubrics(t, db)
	if len(rbs) != 3 {
		t.Fatalf("%d rubrics, want 3: %+v", len(rbs), rbs)
	}
	for i, want := range []int{2, 2, 2} {
		if rbs[i].Support != want {
			t.Errorf("rubric %d support %d, want %d", rbs[i].ID, rbs[i].Support, want)
		}
	}
	if !slices.Equal(res.Supported, []uint64{1, 2, 3}) || !slices.Equal(res.Admitted, []uint64{3}) {
		t.Errorf("supported %v admitted %v", res.Supported, res.Admitted)
	}
	ev := eventsOf(t, db, EvSupport)
	if len(ev) != 3 {
		t.Fatalf("%d support events", len(ev))
	}
	if pl := decode[SupportPayload](t, ev[1]); pl.Draft != 1 || pl.Jaccard != 10.0/12 || ev[1].Rubric != 2 {
		t.Errorf("support payload %+v on rubric %d", pl, ev[1].Rubric)
	}
}

// Consolidation lineage: absorbed drafts are merged into the public rubric
// that absorbed them (new, or an existing near-duplicate), listed in its
// parents; drafts nobody absorbed are dropped; Check stays clean.
func TestConsolidationLineage(t *testing.T) {
	db := newTestDB(t)
	rs := seed(t, db,
		public(publicText("progress"), "progress"),                    // 1
		candidate("drafted about progress earlier on", "progress"),    // 2
		candidate("drafted about revisits earlier on", "revisits"),    // 3
		candidate("a draft about nothing the consolidator knows", ""), // 4
	)
	rs[1].Support, rs[2].Support = 2, 3
	if err := db.Update(func(tx *store.Tx) error {
		r, _ := tx.Run(testRun)
		if err := r.UpdateRubric(rs[1]); err != nil {
			return err
		}
		return r.UpdateRubric(rs[2])
	}); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ConsolidateAt = 4
	ind := inducerFunc(func(InduceInput) ([]model.Draft, error) {
		return []model.Draft{{Text: "Fewer revisits of seen states is better", Feature: "revisits"}}, nil
	})
	con := &featureConsolidator{}
	p := newTestPool(t, db, cfg, ind, con, &featureJudge{})
	if _, err := p.BeginStep(ctx, 2); err != nil {
		t.Fatal(err)
	}
	g, trajs := addGroup(t, db, 2, []tr{{0, 0.9, "revisits=0"}, {0, 0.2, "revisits=3"}, {0, 0.5, "revisits=1"}})
	res, err := p.Prepare(ctx, 2, g, trajs)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Consolidated || con.calls != 1 || !slices.Equal(res.Admitted, []uint64{5}) {
		t.Fatalf("consolidated %v after %d calls, admitted %v", res.Consolidated, con.calls, res.Admitted)
	}
	applyGroup(t, db, res, trajs)
	got := map[uint64]model.Rubric{}
	for _, rb := range allRubrics(t, db) {
		got[rb.ID] = rb
	}
	if len(got) != 6 {
		t.Fatalf("%d rubrics: %+v", len(got), got)
	}
	pub, fresh := got[1], got[6]
	if pub.Pool != model.PoolPublic || !slices.Equal(pub.Parents, []uint64{2}) || pub.Support != 3 {
		t.Errorf("existing public rubric after merge: %+v", pub)
	}
	if fresh.Pool != model.PoolPublic || fresh.Text != publicText("revisits") || !slices.Equal(fresh.Parents, []uint64{3, 5}) ||
		fresh.Support != 4 || fresh.CreatedStep != 2 || fresh.Usage.LastActivation != -1 || fresh.Feature != "revisits" {
		t.Errorf("new public rubric: %+v", fresh)
	}
	for id, into := range map[uint64]uint64{2: 1, 3: 6, 5: 6} {
		if rb := got[id]; rb.Pool != model.PoolMerged || rb.MergedInto != into {
			t.Errorf("draft %d: pool %s merged into %d, want merged into %d", id, rb.Pool, rb.MergedInto, into)
		}
	}
	if rb := got[4]; rb.Pool != model.PoolRetired || rb.RetireStep != 2 || !strings.HasPrefix(rb.RetireReason, "dropped") {
		t.Errorf("unabsorbed draft: %+v", rb)
	}
	ev := eventsOf(t, db, EvConsolidate)
	if len(ev) != 1 {
		t.Fatalf("%d consolidate events", len(ev))
	}
	pl := decode[ConsolidatePayload](t, ev[0])
	if !slices.Equal(pl.Drafts, []uint64{2, 3, 4, 5}) || !slices.Equal(pl.Public, []uint64{1}) || !slices.Equal(pl.Dropped, []uint64{4}) ||
		len(pl.Outputs) != 2 || !pl.Outputs[0].Duplicate || pl.Outputs[0].Into != 1 || pl.Outputs[1].Duplicate || pl.Outputs[1].Into != 6 {
		t.Errorf("consolidate payload %+v", pl)
	}
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Errorf("check: %v %v", vs, err)
	}
	// The new public rubric waits for the next step.
	if ids, err := p.BeginStep(ctx, 2); err != nil || !slices.Equal(ids, []uint64{1}) {
		t.Errorf("step 2 again: %v %v", ids, err)
	}
	if ids, err := p.BeginStep(ctx, 3); err != nil || !slices.Equal(ids, []uint64{1, 6}) {
		t.Errorf("step 3: %v %v", ids, err)
	}
}

// Retirement by streak and by correlation, with the step and reason stored,
// and a retired rubric no longer scores the rest of its step.
func TestRetirement(t *testing.T) {
	// Outcome rises with the node; "anti" falls, "flat" is missing (ties).
	group := []tr{{0.1, 0.1, "anti=3 sep=0"}, {0.5, 0.5, "anti=2 sep=1"}, {0.9, 0.9, "anti=1 sep=2"}}
	cases := []struct {
		name        string
		feature     string
		streak      int // before the group
		activations int // before BeginStep
		retire      string
	}{
		{"streak reaches the limit", "flat", 4, 0, ""},
		{"streak passes the limit", "flat", 5, 0, "mastered: low-variance streak 6 > 5"},
		{"a separating group resets the streak", "sep", 5, 0, ""},
		{"uncorrelated after enough activations", "anti", 0, 2, "uncorrelated: rho -1 < 0.2"},
		{"uncorrelated too early", "anti", 0, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newTestDB(t)
			rb := public("judge "+c.feature, c.feature)
			rb.Usage.LowVarStreak, rb.Usage.Activations = c.streak, c.activations
			seed(t, db, rb)
			p := newTestPool(t, db, DefaultConfig(), noDrafts, &featureConsolidator{}, &featureJudge{})
			if _, err := p.BeginStep(ctx, 7); err != nil {
				t.Fatal(err)
			}
			g, trajs := addGroup(t, db, 7, group)
			res, err := p.Prepare(ctx, 7, g, trajs)
			if err != nil {
				t.Fatal(err)
			}
			applyGroup(t, db, res, trajs)
			got := rubricByID(t, db, 1)
			if c.retire == "" {
				if got.Pool != model.PoolPublic || len(res.Retired) != 0 {
					t.Fatalf("retired: %+v", got)
				}
				return
			}
			if got.Pool != model.PoolRetired || got.RetireStep != 7 || got.RetireReason != c.retire || !slices.Equal(res.Retired, []uint64{1}) {
				t.Fatalf("got %s at step %d: %q, want retired at 7: %q", got.Pool, got.RetireStep, got.RetireReason, c.retire)
			}
			// The rest of the step goes without it, and the step's active
			// set is still reported the same.
			g2, trajs2 := addGroup(t, db, 7, group)
			res2, err := p.Prepare(ctx, 7, g2, trajs2)
			if err != nil {
				t.Fatal(err)
			}
			if res2.Rubrics != nil || res2.JudgeCalls != 0 || res2.Lambda != 0 {
				t.Fatalf("retired rubric still scores: %+v", res2)
			}
			if ids, err := p.BeginStep(ctx, 7); err != nil || !slices.Equal(ids, []uint64{1}) {
				t.Fatalf("step 7 again: %v %v", ids, err)
			}
		})
	}
}

// Bad interface outputs and bad inputs are typed errors and write nothing.
func TestInvalidOutputsWriteNothing(t *testing.T) {
	group := []tr{{0, 0.1, "x=1"}, {0, 0.5, "x=2"}, {1, 0.9, "x=3"}}
	errBoom := errors.New("llm down")
	cases := []struct {
		name   string
		judge  func(model.Rubric, Trajectory, Trajectory) (Outcome, error)
		drafts []model.Draft
		con    func(drafts, public []model.Rubric) ([]model.Consolidated, error)
		mutate func([]Trajectory)
		want   error
		source string
	}{
		{name: "judge returns the zero outcome", judge: func(model.Rubric, Trajectory, Trajectory) (Outcome, error) { return 0, nil }, want: ErrInvalidOutput, source: "judge"},
		{name: "judge returns an unknown outcome", judge: func(model.Rubric, Trajectory, Trajectory) (Outcome, error) { return 9, nil }, want: ErrInvalidOutput, source: "judge"},
		{name: "judge fails", judge: func(model.Rubric, Trajectory, Trajectory) (Outcome, error) { return 0, errBoom }, want: errBoom},
		{name: "empty draft", drafts: []model.Draft{{Text: "fine", Feature: "x"}, {Text: " ... "}}, want: ErrInvalidOutput, source: "inducer"},
		{name: "consolidator names an unknown draft", con: func(d, _ []model.Rubric) ([]model.Consolidated, error) {
			return []model.Consolidated{{Text: "t", Absorbs: []uint64{d[0].ID, 999}}}, nil
		}, want: ErrInvalidOutput, source: "consolidator"},
		{name: "consolidator names a public rubric", con: func(_, p []model.Rubric) ([]model.Consolidated, error) {
			return []model.Consolidated{{Text: "t", Absorbs: []uint64{p[0].ID}}}, nil
		}, want: ErrInvalidOutput, source: "consolidator"},
		{name: "consolidator absorbs a draft twice", con: func(d, _ []model.Rubric) ([]model.Consolidated, error) {
			return []model.Consolidated{{Text: "t", Absorbs: []uint64{d[0].ID}}, {Text: "u", Absorbs: []uint64{d[0].ID}}}, nil
		}, want: ErrInvalidOutput, source: "consolidator"},
		{name: "consolidator output absorbs nothing", con: func(d, _ []model.Rubric) ([]model.Consolidated, error) {
			return []model.Consolidated{{Text: "t"}}, nil
		}, want: ErrInvalidOutput, source: "consolidator"},
		{name: "consolidator output without text", con: func(d, _ []model.Rubric) ([]model.Consolidated, error) {
			return []model.Consolidated{{Text: "!", Absorbs: []uint64{d[0].ID}}}, nil
		}, want: ErrInvalidOutput, source: "consolidator"},
		{name: "NaN outcome", mutate: func(ts []Trajectory) { ts[1].Outcome = math.NaN() }, want: ErrInvalidInput},
		{name: "infinite reward", mutate: func(ts []Trajectory) { ts[0].Reward = math.Inf(1) }, want: ErrInvalidInput},
		{name: "repeated node", mutate: func(ts []Trajectory) { ts[1].Node = ts[0].Node }, want: ErrInvalidInput},
		{name: "foreign node", mutate: func(ts []Trajectory) { ts[1].Node = 999 }, want: model.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newTestDB(t)
			seed(t, db, public("judge x", "x"), candidate("an older draft", "x"))
			cfg := DefaultConfig()
			cfg.ConsolidateAt = 1
			j := &featureJudge{}
			if c.judge != nil {
				j.override = func(rb model.Rubric, a, b Trajectory) (Outcome, error) { return c.judge(rb, a, b) }
			}
			drafts := c.drafts
			if drafts == nil {
				drafts = []model.Draft{{Text: "more x is better", Feature: "x"}}
			}
			con := &featureConsolidator{override: c.con}
			p := newTestPool(t, db, cfg, inducerFunc(func(InduceInput) ([]model.Draft, error) { return drafts, nil }), con, j)
			if _, err := p.BeginStep(ctx, 1); err != nil {
				t.Fatal(err)
			}
			g, trajs := addGroup(t, db, 1, group)
			if c.mutate != nil {
				c.mutate(trajs)
			}
			before, seq := allRubrics(t, db), lastSeq(t, db)
			res, err := p.Prepare(ctx, 1, g, trajs)
			if !errors.Is(err, c.want) || res != nil {
				t.Fatalf("Prepare = %v, %v; want %v", res, err, c.want)
			}
			if c.source != "" {
				var oe *OutputError
				if !errors.As(err, &oe) || oe.Source != c.source {
					t.Fatalf("error %v is not an OutputError from the %s", err, c.source)
				}
			}
			if after := allRubrics(t, db); !slices.EqualFunc(before, after, rubricEqual) || lastSeq(t, db) != seq {
				t.Fatal("a failed Prepare wrote something")
			}
		})
	}
}

func rubricEqual(a, b model.Rubric) bool {
	return a.ID == b.ID && a.Pool == b.Pool && a.Support == b.Support && a.Usage == b.Usage
}

// Apply refuses a result prepared against another state, or another run,
// and writes nothing; a shaped group cannot be prepared again.
func TestApplyStaleAndDone(t *testing.T) {
	db := newTestDB(t)
	seed(t, db, public("judge x", "x"))
	p := newTestPool(t, db, DefaultConfig(), noDrafts, &featureConsolidator{}, &featureJudge{})
	if _, err := p.BeginStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	g1, t1 := addGroup(t, db, 1, []tr{{0, 0, "x=1"}, {0, 1, "x=2"}})
	g2, t2 := addGroup(t, db, 1, []tr{{0, 0, "x=2"}, {0, 1, "x=1"}})
	r1, err := p.Prepare(ctx, 1, g1, t1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p.Prepare(ctx, 1, g2, t2)
	if err != nil {
		t.Fatal(err)
	}
	applyGroup(t, db, r1, t1)
	seq := lastSeq(t, db)
	err = db.Update(func(tx *store.Tx) error { return commitGroup(tx, r2, t2) })
	if !errors.Is(err, ErrStale) || lastSeq(t, db) != seq {
		t.Fatalf("stale Apply: %v (seq %d → %d)", err, seq, lastSeq(t, db))
	}
	if _, err := p.Prepare(ctx, 1, g1, t1); !errors.Is(err, ErrGroupDone) {
		t.Fatalf("preparing an applied group: %v", err)
	}
	// Prepared again, g2 applies.
	if r2, err = p.Prepare(ctx, 1, g2, t2); err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *store.Tx) error {
		other, err := tx.CreateRun("r2", nil, nil)
		if err != nil {
			return err
		}
		return r2.Apply(other)
	})
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("Apply to another run: %v", err)
	}
	applyGroup(t, db, r2, t2)
	if u := rubricByID(t, db, 1).Usage; u.N != 4 || u.PairsJudged != 2 {
		t.Fatalf("usage after two groups: %+v", u)
	}
}
