package rubricpool

import (
	"cmp"
	"context"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"math"
	"slices"
	"strconv"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/store"
)

// Prepare shapes one group and plans every pool change it causes, without
// writing: it reads the stored pool (one read-only transaction), then makes
// all the inducer, consolidator and judge calls outside any transaction,
// so slow LLM calls never hold the file's writer lock. The caller folds
// the result's Scores into its advantages and calls Apply in the
// transaction that writes them.
//
// In order, over the state Prepare read:
//
//  1. Scoring. Each public rubric activated at step (BeginStep) judges the
//     sparse pair set of the group (PairSet over base-reward order, A/B
//     order by Swap(seed, step, group, rubric, a, b)); win rates averaged
//     over the rubrics and centred are the Scores. Usage statistics: pairs
//     judged, the win rates' variance and the low-variance streak (per
//     scored group), the running (win rate, outcome) correlation sums, and
//     groups unlocked (base rewards all equal, shaped ones not; credited to
//     every rubric whose own win rates were not constant). Then retirement
//     (RetireReason).
//  2. Induction, for groups of 3 or more whose outcomes are not all equal
//     (otherwise no draft could be admitted: its correlation with the
//     outcome is undefined): anchors by PickAnchors, one Induce call.
//  3. Admission of each draft in order: a near-duplicate of a candidate or
//     public rubric adds to its support (no judge call); otherwise it is
//     judged over the group like an active rubric and admitted as a
//     candidate when its win rates' variance ≥ VarMin and their Pearson
//     correlation with the outcome ≥ RhoMin; a rejection is recorded with
//     its figures.
//  4. Consolidation, once the candidate pool holds ConsolidateAt drafts:
//     each consolidator output becomes a public rubric, or, when it
//     near-duplicates one, adds its drafts to that rubric; absorbed drafts
//     are merged (MergedInto the public rubric, listed in its Parents) and
//     the rest are dropped (retired).
//
// Every decision is a function of (Config, step, group, trajectories, the
// stored pool) and the interfaces' answers, so preparing the same group
// again after a crash yields the same result.
func (p *Pool) Prepare(ctx context.Context, step uint64, group model.Group, trajs []Trajectory) (*GroupResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkInput(step, group, trajs); err != nil {
		return nil, err
	}
	var base []model.Rubric
	err := p.db.ViewRun(p.run, func(r *store.RunTx) error {
		g, err := r.GroupAt(step, group.ID)
		if err != nil {
			return err
		}
		if g.Status == model.GroupClosed {
			return fmt.Errorf("%w: group %d of step %d is closed", ErrGroupDone, g.ID, step)
		}
		advs, err := r.Advantages(step, g.ID)
		if err != nil {
			return err
		}
		if len(advs) > 0 {
			return fmt.Errorf("%w: group %d of step %d has advantage records", ErrGroupDone, g.ID, step)
		}
		for _, t := range trajs {
			n, err := r.Node(t.Node)
			if err != nil {
				return err
			}
			if n.Group != g.ID {
				return inputf("node %d belongs to group %d, not %d", n.ID, n.Group, g.ID)
			}
		}
		group = g // the stored record is the truth the inducer sees
		base, err = r.Rubrics("")
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, begun, err := stepBegun(base, step); err != nil {
		return nil, err
	} else if !begun {
		return nil, fmt.Errorf("%w: step %d (call BeginStep before preparing its groups)", ErrStepNotBegun, step)
	}

	pr := &preparer{
		p: p, ctx: ctx, step: step, group: group, trajs: trajs,
		m:   newPoolCopy(base),
		res: &GroupResult{Step: step, Group: group.ID, run: p.run, base: base},
	}
	pr.rewards = make([]float64, len(trajs))
	pr.outcomes = make([]float64, len(trajs))
	pr.nodes = make([]uint64, len(trajs))
	for i, t := range trajs {
		pr.rewards[i], pr.outcomes[i], pr.nodes[i] = t.Reward, t.Outcome, t.Node
	}
	pr.order = rewardOrder(trajs)
	for _, phase := range []func() error{pr.score, pr.induce, pr.consolidate} {
		if err := phase(); err != nil {
			return nil, err
		}
	}
	res := pr.res
	p.log.Debug("rubricpool: group prepared", "run", p.run, "step", step, "group", group.ID,
		"rubrics", res.Rubrics, "unlocked", res.Unlocked, "judge_calls", res.JudgeCalls,
		"drafts", res.Drafts, "admitted", len(res.Admitted), "rejected", res.Rejected,
		"consolidated", res.Consolidated, "retired", len(res.Retired))
	return res, nil
}

func checkInput(step uint64, group model.Group, trajs []Trajectory) error {
	if step == 0 {
		return inputf("step 0: steps start at 1")
	}
	if group.ID == 0 || group.Step != step {
		return inputf("group %d of step %d given for step %d", group.ID, group.Step, step)
	}
	seen := make(map[uint64]bool, len(trajs))
	for i, t := range trajs {
		switch {
		case t.Node == 0:
			return inputf("trajectory %d has node id 0", i)
		case seen[t.Node]:
			return inputf("node %d appears twice in group %d", t.Node, group.ID)
		case !isFinite(t.Reward) || !isFinite(t.Outcome):
			return inputf("node %d has reward %v, outcome %v", t.Node, t.Reward, t.Outcome)
		}
		seen[t.Node] = true
	}
	return nil
}

// rewardOrder is the trajectories' indices by base reward, ties by node id.
func rewardOrder(trajs []Trajectory) []int {
	order := make([]int, len(trajs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(trajs[a].Reward, trajs[b].Reward); c != 0 {
			return c
		}
		return cmp.Compare(trajs[a].Node, trajs[b].Node)
	})
	return order
}

// draftKey is the rubric key Swap uses for the i-th draft of a group, which
// has no id yet; the top bit keeps it apart from any rubric id.
func draftKey(i int) uint64 { return 1<<63 | uint64(i) }

// preparer holds one Prepare call's working state.
type preparer struct {
	p        *Pool
	ctx      context.Context
	step     uint64
	group    model.Group
	trajs    []Trajectory
	nodes    []uint64
	rewards  []float64
	outcomes []float64
	order    []int
	m        *poolCopy
	res      *GroupResult
}

// judged is one rubric's pass over the group.
type judged struct {
	judgements []Judgement
	verdicts   []Verdict
	winRates   []float64
	variance   float64
}

// judgeGroup has the judge compare the group's pair set under rb. key is
// the rubric's id (or draftKey) for the A/B randomisation.
func (pr *preparer) judgeGroup(rb model.Rubric, key uint64) (judged, error) {
	var j judged
	for _, pair := range PairSet(pr.order) {
		a, b := pair[0], pair[1]
		swapped := Swap(pr.p.cfg.Seed, pr.step, pr.group.ID, key, pr.nodes[a], pr.nodes[b])
		first, second := pr.trajs[a], pr.trajs[b]
		if swapped {
			first, second = second, first
		}
		out, err := pr.p.judge.Judge(pr.ctx, cloneRubric(rb), first, second)
		pr.res.JudgeCalls++
		if err != nil {
			return j, fmt.Errorf("rubricpool: judge %s on nodes %d, %d: %w", rubricName(rb, key), first.Node, second.Node, err)
		}
		if !out.Valid() {
			return j, outputf("judge", "%v for %s on nodes %d, %d", out, rubricName(rb, key), first.Node, second.Node)
		}
		if swapped {
			switch out {
			case AWins:
				out = BWins
			case BWins:
				out = AWins
			}
		}
		j.judgements = append(j.judgements, Judgement{A: a, B: b, Result: out, Swapped: swapped})
		j.verdicts = append(j.verdicts, Verdict{A: pr.nodes[a], B: pr.nodes[b], Result: out, Swapped: swapped})
	}
	j.winRates = WinRates(len(pr.trajs), j.judgements)
	j.variance = grpo.Variance(j.winRates)
	return j, nil
}

func rubricName(rb model.Rubric, key uint64) string {
	if rb.ID == 0 {
		return "draft " + strconv.FormatUint(key&^(1<<63), 10)
	}
	return "rubric " + strconv.FormatUint(rb.ID, 10)
}

// score runs the step's active rubrics over the group, updates their usage
// and retires those RetireReason condemns.
func (pr *preparer) score() error {
	cfg, res := pr.p.cfg, pr.res
	n := len(pr.trajs)
	res.Scores = make([]float64, n)
	res.ZeroVariance = grpo.Advantages(pr.rewards, 0).ZeroVariance
	res.ZeroVarianceAfter = res.ZeroVariance
	var active []*model.Rubric
	for _, rb := range pr.m.inPool(model.PoolPublic) {
		if rb.Usage.LastActivation == int64(pr.step) {
			active = append(active, rb)
		}
	}
	if n < 2 || len(active) == 0 {
		return nil
	}
	passes := make([]judged, len(active))
	perRubric := make([][]float64, len(active))
	for k, rb := range active {
		j, err := pr.judgeGroup(*rb, rb.ID)
		if err != nil {
			return err
		}
		passes[k], perRubric[k] = j, j.winRates
		res.Rubrics = append(res.Rubrics, rb.ID)
	}
	res.Scores = GroupScore(n, perRubric)
	res.Lambda = cfg.Lambda
	res.ZeroVarianceAfter = grpo.Advantages(grpo.Shape(pr.rewards, res.Scores, cfg.Lambda), 0).ZeroVariance
	// The rule the group's advantage records will answer to.
	res.Unlocked = model.Advantage{ZeroVariance: res.ZeroVariance, ZeroVarianceAfter: res.ZeroVarianceAfter}.Unlocked()

	for k, rb := range active {
		j := passes[k]
		u := &rb.Usage
		u.PairsJudged += len(j.judgements)
		u.LastVariance = j.variance
		if j.variance < cfg.VarMin {
			u.LowVarStreak++
		} else {
			u.LowVarStreak = 0
		}
		c := UsageCorr(*u)
		c.AddAll(j.winRates, pr.outcomes)
		setCorr(u, c)
		credited := res.Unlocked && !grpo.Advantages(j.winRates, 0).ZeroVariance
		if credited {
			u.GroupsUnlocked++
		}
		rho, ok := c.Rho()
		pr.update(*rb)
		pr.event(EvJudge, rb.ID, JudgePayload{
			Nodes: pr.nodes, Outcomes: pr.outcomes, Verdicts: j.verdicts, WinRates: j.winRates,
			Variance: j.variance, Streak: u.LowVarStreak, Rho: rho, RhoDefined: ok, Unlocked: credited,
		})
	}
	pr.event(EvScore, 0, ScorePayload{
		// Copies: the caller may change the result's slices before Apply.
		Nodes: pr.nodes, Rewards: pr.rewards, Rubrics: slices.Clone(res.Rubrics), Scores: slices.Clone(res.Scores), Lambda: res.Lambda,
		ZeroVariance: res.ZeroVariance, ZeroVarianceAfter: res.ZeroVarianceAfter,
	})
	for _, rb := range active {
		if reason, retire := RetireReason(usageOf(*rb), rb.Usage.LowVarStreak, cfg); retire {
			pr.move(rb.ID, store.RubricMove{To: model.PoolRetired, Step: pr.step, Reason: reason})
			res.Retired = append(res.Retired, rb.ID)
		}
	}
	return nil
}

// varies reports whether xs has a spread Pearson can use (the same test
// admission applies to the outcome).
func varies(xs []float64) bool {
	_, ok := Pearson(xs, xs)
	return ok
}

// induce drafts rubrics from the group's anchors and admits them.
func (pr *preparer) induce() error {
	n := len(pr.trajs)
	if n < 3 || !varies(pr.outcomes) {
		return nil
	}
	scored := make([]Scored, n)
	at := make(map[uint64]int, n)
	for i, t := range pr.trajs {
		scored[i] = Scored{Node: t.Node, Outcome: t.Outcome}
		at[t.Node] = i
	}
	anchors, ok := PickAnchors(scored)
	if !ok {
		return nil // unreachable after checkInput, kept as a guard
	}
	drafts, err := pr.p.inducer.Induce(pr.ctx, InduceInput{
		Step: pr.step, Group: pr.group,
		Best: pr.trajs[at[anchors.Best]], Worst: pr.trajs[at[anchors.Worst]], Hard: pr.trajs[at[anchors.Hard]],
	})
	if err != nil {
		return fmt.Errorf("rubricpool: induce step %d group %d: %w", pr.step, pr.group.ID, err)
	}
	for i, d := range drafts {
		if NormalizeRubric(d.Text) == "" {
			return outputf("inducer", "draft %d of group %d has no text", i, pr.group.ID)
		}
	}
	drafts = slices.Clone(drafts)
	pr.res.Drafts = len(drafts)
	pr.event(EvInduce, 0, InducePayload{Best: anchors.Best, Worst: anchors.Worst, Hard: anchors.Hard, Drafts: drafts})

	origin := model.RubricOrigin{Step: pr.step, Group: pr.group.ID, Anchors: []uint64{anchors.Best, anchors.Worst, anchors.Hard}}
	cfg := pr.p.cfg
	for i, d := range drafts {
		pool := append(pr.m.inPool(model.PoolCandidate), pr.m.inPool(model.PoolPublic)...)
		if dup, jac := pr.nearest(d.Text, pool); dup != nil {
			dup.Support++
			pr.update(*dup)
			pr.event(EvSupport, dup.ID, SupportPayload{Draft: i, Text: d.Text, Jaccard: jac, Support: dup.Support})
			pr.res.Supported = append(pr.res.Supported, dup.ID)
			continue
		}
		rb := model.Rubric{
			Pool: model.PoolCandidate, Text: d.Text, Feature: d.Feature, Origin: cloneOrigin(origin),
			Support: 1, CreatedStep: pr.step, Usage: model.RubricUsage{LastActivation: -1},
		}
		j, err := pr.judgeGroup(rb, draftKey(i))
		if err != nil {
			return err
		}
		rho, rhoOK := Pearson(j.winRates, pr.outcomes)
		pl := AdmissionPayload{
			Draft: i, Text: d.Text, Feature: d.Feature, Nodes: pr.nodes, Outcomes: pr.outcomes,
			Verdicts: j.verdicts, WinRates: j.winRates, Variance: j.variance, Rho: rho, RhoDefined: rhoOK,
		}
		switch {
		case !(j.variance >= cfg.VarMin):
			pl.Reason = fmt.Sprintf("variance %s < VarMin %s", fmtFloat(j.variance, -1), fmtFloat(cfg.VarMin, -1))
		case !rhoOK:
			pl.Reason = "correlation with the outcome undefined"
		case !(rho >= cfg.RhoMin):
			pl.Reason = fmt.Sprintf("rho %s < RhoMin %s", fmtFloat(rho, -1), fmtFloat(cfg.RhoMin, -1))
		}
		if pl.Reason != "" {
			pr.event(EvReject, 0, pl)
			pr.res.Rejected++
			continue
		}
		rb.ID = pr.m.next
		rb.Variance, rb.Rho = j.variance, rho
		pr.put(rb)
		pr.event(EvAdmit, rb.ID, pl)
		pr.res.Admitted = append(pr.res.Admitted, rb.ID)
	}
	return nil
}

// nearest returns the rubric among pool (in id order) whose text is most
// similar to text, if it is a near-duplicate; ties go to the lowest id.
func (pr *preparer) nearest(text string, pool []*model.Rubric) (*model.Rubric, float64) {
	var best *model.Rubric
	bestJ := math.Inf(-1)
	for _, rb := range pool {
		if j := Jaccard(text, rb.Text); j >= pr.p.cfg.DedupJaccard && (j > bestJ || (j == bestJ && rb.ID < best.ID)) {
			best, bestJ = rb, j
		}
	}
	if best == nil {
		return nil, 0
	}
	return best, bestJ
}

// consolidate runs the consolidator once the candidate pool is full.
func (pr *preparer) consolidate() error {
	cands := pr.m.inPool(model.PoolCandidate)
	if len(cands) < pr.p.cfg.ConsolidateAt {
		return nil
	}
	public := pr.m.inPool(model.PoolPublic)
	outs, err := pr.p.con.Consolidate(pr.ctx, copies(cands), copies(public))
	if err != nil {
		return fmt.Errorf("rubricpool: consolidate at step %d group %d: %w", pr.step, pr.group.ID, err)
	}
	isCand := make(map[uint64]*model.Rubric, len(cands))
	for _, rb := range cands {
		isCand[rb.ID] = rb
	}
	taken := map[uint64]bool{}
	for i, o := range outs {
		if NormalizeRubric(o.Text) == "" {
			return outputf("consolidator", "output %d has no text", i)
		}
		if len(o.Absorbs) == 0 {
			return outputf("consolidator", "output %d absorbs no draft", i)
		}
		for _, id := range o.Absorbs {
			switch rb, known := pr.m.byID[id], isCand[id] != nil; {
			case rb == nil:
				return outputf("consolidator", "output %d absorbs unknown draft %d", i, id)
			case !known:
				return outputf("consolidator", "output %d absorbs rubric %d, which is %s, not a candidate", i, id, rb.Pool)
			case taken[id]:
				return outputf("consolidator", "draft %d is absorbed twice", id)
			}
			taken[id] = true
		}
	}

	res := pr.res
	res.Consolidated = true
	pl := ConsolidatePayload{Drafts: idsOf(cands), Public: idsOf(public)}
	for _, o := range outs {
		absorbs := slices.Sorted(slices.Values(o.Absorbs))
		support := 0
		for _, id := range absorbs {
			support += isCand[id].Support
		}
		out := ConsolidationResult{Text: o.Text, Feature: o.Feature, Absorbs: absorbs}
		if dup, jac := pr.nearest(o.Text, pr.m.inPool(model.PoolPublic)); dup != nil {
			dup.Parents = mergeIDs(dup.Parents, absorbs)
			dup.Support += support
			pr.update(*dup)
			out.Into, out.Duplicate, out.Jaccard = dup.ID, true, jac
		} else {
			rb := model.Rubric{
				ID: pr.m.next, Pool: model.PoolPublic, Text: o.Text, Feature: o.Feature,
				Origin: model.RubricOrigin{Step: pr.step, Group: pr.group.ID}, Parents: absorbs,
				Support: support, CreatedStep: pr.step, Usage: model.RubricUsage{LastActivation: -1},
			}
			pr.put(rb)
			out.Into = rb.ID
			res.NewPublic = append(res.NewPublic, rb.ID)
		}
		for _, id := range absorbs {
			pr.move(id, store.RubricMove{To: model.PoolMerged, MergedInto: out.Into})
			res.Merged = append(res.Merged, id)
		}
		pl.Outputs = append(pl.Outputs, out)
	}
	for _, rb := range cands {
		if !taken[rb.ID] {
			pr.move(rb.ID, store.RubricMove{To: model.PoolRetired, Step: pr.step,
				Reason: fmt.Sprintf("dropped: no rubric of the consolidation at step %d absorbed it", pr.step)})
			pl.Dropped = append(pl.Dropped, rb.ID)
			res.Retired = append(res.Retired, rb.ID)
		}
	}
	pr.event(EvConsolidate, 0, pl)
	return nil
}

// put, update, move and event plan a write and apply it to the model, the
// way the store will apply it.
func (pr *preparer) put(rb model.Rubric) {
	pr.m.add(cloneRubric(rb))
	pr.res.ops = append(pr.res.ops, op{kind: opPut, rubric: cloneRubric(rb)})
}

func (pr *preparer) update(rb model.Rubric) {
	pr.res.ops = append(pr.res.ops, op{kind: opUpdate, rubric: cloneRubric(rb)})
}

func (pr *preparer) move(id uint64, mv store.RubricMove) {
	rb := pr.m.byID[id]
	switch mv.To {
	case model.PoolMerged:
		rb.MergedInto = mv.MergedInto
	case model.PoolRetired:
		rb.RetireStep, rb.RetireReason = mv.Step, mv.Reason
	}
	rb.Pool = mv.To
	pr.res.ops = append(pr.res.ops, op{kind: opMove, rubric: model.Rubric{ID: id}, move: mv})
}

func (pr *preparer) event(kind model.EventKind, rubric uint64, payload any) {
	pr.res.ops = append(pr.res.ops, op{kind: opEvent, event: kind, target: rubric, payload: payload})
}

// poolCopy is Prepare's working copy of the pool.
type poolCopy struct {
	byID map[uint64]*model.Rubric
	ids  []uint64 // ascending
	next uint64   // the id the next new rubric gets
}

func newPoolCopy(rubrics []model.Rubric) *poolCopy {
	m := &poolCopy{byID: make(map[uint64]*model.Rubric, len(rubrics)), next: 1}
	for _, rb := range rubrics {
		m.add(cloneRubric(rb))
	}
	return m
}

func (m *poolCopy) add(rb model.Rubric) {
	m.byID[rb.ID] = &rb
	i, _ := slices.BinarySearch(m.ids, rb.ID)
	m.ids = slices.Insert(m.ids, i, rb.ID)
	// Ids come from the rubrics bucket's sequence; with no deletions the
	// largest id is that sequence, so the next PutRubric would take +1.
	m.next = max(m.next, rb.ID+1)
}

// inPool returns the rubrics of pool in id order (pointers into the model).
func (m *poolCopy) inPool(pool model.RubricPool) []*model.Rubric {
	var out []*model.Rubric
	for _, id := range m.ids {
		if rb := m.byID[id]; rb.Pool == pool {
			out = append(out, rb)
		}
	}
	return out
}

func copies(rs []*model.Rubric) []model.Rubric {
	out := make([]model.Rubric, len(rs))
	for i, rb := range rs {
		out[i] = cloneRubric(*rb)
	}
	return out
}

func idsOf(rs []*model.Rubric) []uint64 {
	out := make([]uint64, len(rs))
	for i, rb := range rs {
		out[i] = rb.ID
	}
	return out
}

// mergeIDs returns the sorted union of a and b.
func mergeIDs(a, b []uint64) []uint64 {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func cloneOrigin(o model.RubricOrigin) model.RubricOrigin {
	o.Anchors = slices.Clone(o.Anchors)
	return o
}

func cloneRubric(rb model.Rubric) model.Rubric {
	rb.Origin = cloneOrigin(rb.Origin)
	rb.Parents = slices.Clone(rb.Parents)
	return rb
}
