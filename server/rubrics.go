package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// The ARBOR rubric buffer over HTTP. rubricpool drives the lifecycle and
// asks an Inducer, a Consolidator and a Judge (LLMs) for their answers; over
// HTTP the client is the LLM. The exchange is stateless and deterministic:
//
//  1. POST .../rubrics/activate {step} once per step: the step's active
//     public rubrics (rubricpool.Pool.BeginStep).
//  2. POST .../groups/{group}/shape with the answers gathered so far: the
//     server runs rubricpool's Prepare over the group's leaves, answering
//     the pool's questions from the request; whatever is not answered comes
//     back under "needs" (pairs to judge under a rubric or a draft, the
//     anchors to induce drafts from, the candidates to consolidate). Nothing
//     is written. Repeat with the new answers until "complete" (at most
//     three rounds: judgements and drafts, the drafts' judgements,
//     consolidation).
//  3. POST .../groups/{group}/close {"pool": answers}: the same Prepare,
//     then its pool changes, the shaped advantages and the close commit in
//     one transaction.

// asker answers the pool's questions from a client's answers and records
// the ones it cannot answer. Unanswered judgements count as ties and
// missing drafts or consolidations as none, so Prepare runs to the end and
// every question of the round is collected; such a result is never applied.
type asker struct {
	ans   api.ShapeAnswers
	judge map[judgeKey]rubricpool.Outcome
	needs api.ShapeNeeds
	asked map[judgeKey]bool
}

type judgeKey struct {
	rubric uint64
	draft  string
	a, b   uint64
}

func newAsker(ans api.ShapeAnswers) (*asker, error) {
	k := &asker{ans: ans, judge: map[judgeKey]rubricpool.Outcome{}, asked: map[judgeKey]bool{}}
	for i, j := range ans.Judgements {
		var o rubricpool.Outcome
		switch j.Result {
		case "a":
			o = rubricpool.AWins
		case "b":
			o = rubricpool.BWins
		case "tie":
			o = rubricpool.Tie
		default:
			return nil, badRequest("judgements[%d]: result %q: want a, b or tie", i, j.Result)
		}
		if (j.Rubric == 0) == (j.Draft == "") {
			return nil, badRequest("judgements[%d]: name either a rubric id or a draft text", i)
		}
		if j.A == 0 || j.B == 0 || j.A == j.B {
			return nil, badRequest("judgements[%d]: a and b must be two different node ids", i)
		}
		key := judgeKey{j.Rubric, j.Draft, j.A, j.B}
		if prev, ok := k.judge[key]; ok && prev != o {
			return nil, badRequest("judgements[%d]: contradicts an earlier verdict on the same pair", i)
		}
		k.judge[key] = o
	}
	return k, nil
}

func (k *asker) Judge(_ context.Context, rb model.Rubric, a, b rubricpool.Trajectory) (rubricpool.Outcome, error) {
	key := judgeKey{a: a.Node, b: b.Node}
	if rb.ID == 0 {
		key.draft = rb.Text
	} else {
		key.rubric = rb.ID
	}
	if o, ok := k.judge[key]; ok {
		return o, nil
	}
	if !k.asked[key] {
		k.asked[key] = true
		k.needs.Judge = append(k.needs.Judge, api.JudgeNeed{Rubric: key.rubric, Draft: key.draft, Text: rb.Text, A: a.Node, B: b.Node})
	}
	return rubricpool.Tie, nil
}

func (k *asker) Induce(_ context.Context, in rubricpool.InduceInput) ([]model.Draft, error) {
	if k.ans.Drafts != nil {
		return *k.ans.Drafts, nil
	}
	k.needs.Induce = &api.InduceNeed{Best: in.Best.Node, Worst: in.Worst.Node, Hard: in.Hard.Node}
	return nil, nil
}

func (k *asker) Consolidate(_ context.Context, drafts, public []model.Rubric) ([]model.Consolidated, error) {
	if k.ans.Consolidation != nil {
		return *k.ans.Consolidation, nil
	}
	k.needs.Consolidate = &api.ConsolidateNeed{Drafts: drafts, Public: public}
	if k.needs.Consolidate.Public == nil {
		k.needs.Consolidate.Public = []model.Rubric{}
	}
	return nil, nil
}

// prepared is one run of Prepare over a group's leaves.
type prepared struct {
	leaves []tree.Leaf
	trajs  []rubricpool.Trajectory
	k      *asker
	res    *rubricpool.GroupResult
	needs  api.ShapeNeeds
}

// gatherShape reads, in tx (the caller's transaction), what Prepare needs:
// the group's leaves (the coordinator's reading of them), with their
// rewards and outcomes.
func gatherShape(c *tree.Coordinator, tx *store.Tx, g model.Group, ans api.ShapeAnswers) (prepared, error) {
	var out prepared
	var err error
	if out.k, err = newAsker(ans); err != nil {
		return out, err
	}
	if _, out.leaves, err = c.Leaves(tx, g.Step, g.ID, false); err != nil {
		return out, err
	}
	r, err := tx.Run(c.Run())
	if err != nil {
		return out, err
	}
	outcomes := map[uint64]float64{}
	for i, lo := range ans.Outcomes {
		if lo.Outcome == nil {
			return out, badRequest("outcomes[%d]: outcome is required", i)
		}
		outcomes[lo.Leaf] = *lo.Outcome
	}
	for _, l := range out.leaves {
		t := rubricpool.Trajectory{Node: l.Node.ID, Reward: l.Reward}
		if o, ok := outcomes[l.Node.ID]; ok {
			t.Outcome = o
			delete(outcomes, l.Node.ID)
		} else if g.Gold != "" {
			path, err := r.Trajectory(l.Node.ID)
			if err != nil {
				return out, err
			}
			t.Outcome = rubricpool.F1Outcome(g, path)
		} else {
			t.Outcome = l.Reward
		}
		out.trajs = append(out.trajs, t)
	}
	for leaf := range outcomes {
		return out, badRequest("outcomes: node %d is not a leaf of group %d", leaf, g.ID)
	}
	return out, nil
}

// prepare runs rubricpool's Prepare on what gatherShape read. Prepare opens
// its own read transaction, so the caller must not hold one (bbolt can
// deadlock on two read transactions of one goroutine while a writer
// remaps); inside the write transaction of a close it is safe, as no other
// writer can be waiting. GroupResult.Apply checks the pool did not change
// between Prepare's read and the write.
func (s *server) prepare(run string, cfg runconfig.Config, g model.Group, p *prepared) error {
	pool, err := rubricpool.New(s.db, run, cfg.RubricOrDefault(), p.k, p.k, p.k, s.opts.Logger)
	if err != nil {
		return err
	}
	if p.res, err = pool.Prepare(context.Background(), g.Step, g, p.trajs); err != nil {
		return rubricError(err, g.Step)
	}
	p.needs = p.k.needs
	return nil
}

// rubricError gives the pool's refusals their HTTP meaning.
func rubricError(err error, step uint64) error {
	switch {
	case errors.Is(err, rubricpool.ErrStepNotBegun):
		return conflict("%v: POST /api/v1/runs/{run}/rubrics/activate with step %d first", err, step)
	case errors.Is(err, rubricpool.ErrStale), errors.Is(err, rubricpool.ErrGroupDone):
		return conflict("%v", err)
	case errors.Is(err, rubricpool.ErrInvalidInput), errors.Is(err, rubricpool.ErrInvalidOutput):
		return badRequest("%v", err)
	}
	return err
}

func (p prepared) response() api.ShapeResponse {
	out := api.ShapeResponse{Complete: p.needs.Empty(), Needs: p.needs, Leaves: []uint64{}}
	for _, l := range p.leaves {
		out.Leaves = append(out.Leaves, l.Node.ID)
	}
	r := p.res
	if !out.Complete || r == nil {
		return out
	}
	for i, id := range out.Leaves {
		sc := r.Scores[i]
		out.Scores = append(out.Scores, api.LeafScore{Leaf: id, Score: &sc})
	}
	out.PoolDecision = r.PoolDecision
	return out
}

func (s *server) shapeGroup(w http.ResponseWriter, r *http.Request) error {
	var req api.ShapeRequest
	c, gid, err := s.rolloutRequest(w, r, "group", &req)
	if err != nil {
		return err
	}
	run := c.Run()
	var p prepared
	var cfg runconfig.Config
	var g model.Group
	err = s.db.View(func(tx *store.Tx) error {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return err
		}
		if cfg, err = configOf(rt); err != nil {
			return err
		}
		if g, err = rt.Group(gid); err != nil {
			return err
		}
		if g.Status != model.GroupOpen {
			return conflict("group %d is %s: only an open group is shaped", gid, g.Status)
		}
		p, err = gatherShape(c, tx, g, req.ShapeAnswers)
		return err
	})
	if err != nil {
		return err
	}
	if err := s.prepare(run, cfg, g, &p); err != nil {
		return err
	}
	return s.ok(w, p.response())
}

// poolShaping is the shaping of a group by the run's rubric buffer:
// Prepare with the client's answers; the pool's writes are the shaping's
// Apply, so they commit with the advantages and the close.
func (s *server) poolShaping(c *tree.Coordinator, tx *store.Tx, g model.Group, ans api.ShapeAnswers) (*tree.Shaping, error) {
	rt, err := tx.Run(c.Run())
	if err != nil {
		return nil, err
	}
	cfg, err := configOf(rt)
	if err != nil {
		return nil, err
	}
	p, err := gatherShape(c, tx, g, ans)
	if err != nil {
		return nil, err
	}
	if err := s.prepare(c.Run(), cfg, g, &p); err != nil {
		return nil, err
	}
	if !p.needs.Empty() {
		return nil, withStatus(http.StatusConflict, "shaping_incomplete", fmt.Errorf(
			"%w: the pool still needs %d judgements%s%s: POST .../groups/%d/shape to see them",
			api.ErrConflict, len(p.needs.Judge), map[bool]string{true: ", drafts"}[p.needs.Induce != nil],
			map[bool]string{true: ", a consolidation"}[p.needs.Consolidate != nil], g.ID))
	}
	apply := func(r *store.RunTx) error {
		if err := p.res.Apply(r); err != nil {
			return rubricError(err, g.Step)
		}
		return nil
	}
	if len(p.res.Rubrics) == 0 {
		// No rubric shaped the group: plain GRPO, but the pool's own
		// changes (drafts, counts) still commit with the close.
		return &tree.Shaping{Scores: make([]float64, len(p.leaves)), Apply: apply}, nil
	}
	return &tree.Shaping{Scores: p.res.Scores, Lambda: p.res.Lambda, Rubrics: p.res.Rubrics, Apply: apply}, nil
}

func activeAt(rt *store.RunTx, step uint64) (api.ActiveRubrics, error) {
	out := api.ActiveRubrics{Step: step, Active: []model.Rubric{}}
	all, err := rt.Rubrics("")
	for _, rb := range all {
		if rb.Usage.LastActivation == int64(step) {
			out.Active = append(out.Active, rb)
		}
	}
	return out, err
}

func (s *server) activate(w http.ResponseWriter, r *http.Request) error {
	var req api.ActivateRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.Step == 0 {
		return badRequest("step is required (steps start at 1)")
	}
	run := r.PathValue("run")
	// BeginStep commits by itself and is idempotent (a begun step's
	// activation is on record and is returned, not redone), so it runs
	// before the recorded answer; a repeated request still gets the first
	// answer even once later steps have begun.
	var beginErr error
	var cfg runconfig.Config
	err := s.db.View(func(tx *store.Tx) error {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return err
		}
		cfg, err = configOf(rt)
		return err
	})
	if err != nil {
		return err
	}
	if !s.opts.ReadOnly {
		pool, err := rubricpool.New(s.db, run, cfg.RubricOrDefault(), noLLM{}, noLLM{}, noLLM{}, s.opts.Logger)
		if err != nil {
			return err
		}
		_, beginErr = pool.BeginStep(r.Context(), req.Step)
	}
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		if beginErr != nil {
			return 0, nil, rubricError(beginErr, req.Step)
		}
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		out, err := activeAt(rt, req.Step)
		return http.StatusOK, out, err
	})
}

func (s *server) getActiveRubrics(w http.ResponseWriter, r *http.Request) error {
	step, err := queryUint(r, "step", 0)
	if err != nil {
		return err
	}
	if step == 0 {
		return badRequest("query step is required")
	}
	var out api.ActiveRubrics
	err = s.viewRun(r, func(rt *store.RunTx) error {
		var err error
		out, err = activeAt(rt, step)
		return err
	})
	if err != nil {
		return err
	}
	return s.ok(w, out)
}

// noLLM stands in for the interfaces where the pool asks nothing
// (BeginStep).
type noLLM struct{}

func (noLLM) Judge(context.Context, model.Rubric, rubricpool.Trajectory, rubricpool.Trajectory) (rubricpool.Outcome, error) {
	return 0, errors.New("server: no judge here")
}
func (noLLM) Induce(context.Context, rubricpool.InduceInput) ([]model.Draft, error) {
	return nil, errors.New("server: no inducer here")
}
func (noLLM) Consolidate(context.Context, []model.Rubric, []model.Rubric) ([]model.Consolidated, error) {
	return nil, errors.New("server: no consolidator here")
}
