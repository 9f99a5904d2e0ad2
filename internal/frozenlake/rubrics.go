package frozenlake

import (
	"context"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"sort"

	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// The demo's ARBOR stand-ins. In ARBOR an LLM induces, consolidates and
// judges rubrics; here each rubric is about one trajectory feature, so the
// three roles are deterministic and documented:
//
//   - the inducer contrasts tau+ with tau-worst and tau-hard and drafts one
//     rubric per feature on which tau+ is strictly better;
//   - the consolidator merges all drafts about one feature into that
//     feature's canonical public rubric;
//   - the judge prefers the trajectory that is better on the rubric's
//     feature (a tie when equal).
//
// The outcome measure the rubrics are correlated with is the graded
// progress score (closeness to the goal, revisits penalised, 1 at the goal,
// 0 in a hole): FrozenLake has no gold answer to take token F1 against.

// rubricFeature is one judgeable property of a trajectory.
type rubricFeature struct {
	key       string
	canonical string
	higher    bool // whether a larger value is better
	value     func(Features) float64
}

var rubricFeatures = []rubricFeature{
	{"progress", "Prefer the trajectory that ends closer to the goal without falling into a hole.", true, func(f Features) float64 { return f.Score }},
	{"revisits", "Prefer the trajectory that revisits fewer cells.", false, func(f Features) float64 { return float64(f.Revisits) }},
	{"wall_bumps", "Prefer the trajectory that bumps into the edge of the lake less often.", false, func(f Features) float64 { return float64(f.WallBumps) }},
	{"steps_wasted", "Prefer the trajectory that wastes fewer steps beyond the shortest path to where it ends.", false, func(f Features) float64 { return float64(f.StepsWasted) }},
	{"max_repeat", "Prefer the trajectory that repeats the same action fewer times in a row.", false, func(f Features) float64 { return float64(f.MaxRepeat) }},
	{"distinct", "Prefer the trajectory that explores more distinct cells.", true, func(f Features) float64 { return float64(f.Distinct) }},
}

func featureByKey(key string) (rubricFeature, bool) {
	for _, f := range rubricFeatures {
		if f.key == key {
			return f, true
		}
	}
	return rubricFeature{}, false
}

func turnsOf(path []model.PathTurn) []model.Turn {
	out := make([]model.Turn, len(path))
	for i := range path {
		out[i] = path[i].Turn
	}
	return out
}

func (m Map) trajFeatures(t rubricpool.Trajectory) Features {
	turns := turnsOf(t.Turns)
	return m.Features(Positions(m, turns), Actions(turns))
}

// better reports whether a beats b on f.
func (f rubricFeature) better(a, b Features) bool {
	if f.higher {
		return f.value(a) > f.value(b)
	}
	return f.value(a) < f.value(b)
}

// FeatureInducer drafts rubrics from the features that separate tau+ from
// the negatives.
type FeatureInducer struct{ Map Map }

// Induce implements rubricpool.Inducer.
func (in FeatureInducer) Induce(_ context.Context, x rubricpool.InduceInput) ([]model.Draft, error) {
	best := in.Map.trajFeatures(x.Best)
	var out []model.Draft
	for _, neg := range []rubricpool.Trajectory{x.Worst, x.Hard} {
		nf := in.Map.trajFeatures(neg)
		for _, f := range rubricFeatures {
			if f.better(best, nf) {
				out = append(out, model.Draft{Feature: f.key, Text: fmt.Sprintf(
					"%s (node %d scored %g on %s where node %d scored %g)", f.canonical, x.Best.Node, f.value(best), f.key, neg.Node, f.value(nf))})
			}
		}
	}
	return out, nil
}

// FeatureConsolidator merges drafts about one feature into its canonical
// rubric.
type FeatureConsolidator struct{}

// Consolidate implements rubricpool.Consolidator.
func (FeatureConsolidator) Consolidate(_ context.Context, drafts []model.Rubric, _ []model.Rubric) ([]model.Consolidated, error) {
	byFeature := map[string][]uint64{}
	for _, d := range drafts {
		if _, ok := featureByKey(d.Feature); ok {
			byFeature[d.Feature] = append(byFeature[d.Feature], d.ID)
		}
	}
	var out []model.Consolidated
	for _, f := range rubricFeatures {
		if ids := byFeature[f.key]; len(ids) > 0 {
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			out = append(out, model.Consolidated{Text: f.canonical, Feature: f.key, Absorbs: ids})
		}
	}
	return out, nil
}

// FeatureJudge compares two trajectories on the rubric's feature.
type FeatureJudge struct{ Map Map }

// Judge implements rubricpool.Judge.
func (j FeatureJudge) Judge(_ context.Context, r model.Rubric, a, b rubricpool.Trajectory) (rubricpool.Outcome, error) {
	f, ok := featureByKey(r.Feature)
	if !ok {
		return 0, fmt.Errorf("frozenlake: rubric %d has unknown feature %q", r.ID, r.Feature)
	}
	fa, fb := j.Map.trajFeatures(a), j.Map.trajFeatures(b)
	switch {
	case f.better(fa, fb):
		return rubricpool.AWins, nil
	case f.better(fb, fa):
		return rubricpool.BWins, nil
	}
	return rubricpool.Tie, nil
}

// rubricShaper adapts a rubricpool.Pool to tree.Shaper.
type rubricShaper struct {
	pool *rubricpool.Pool
	m    Map
}

// RubricShaper builds the ARBOR shaper for a demo run with the rubric
// configuration it recorded (EnableRubrics' defaults when it has none).
func RubricShaper(db *store.DB, run string, cfg TrainConfig, m Map) (tree.Shaper, error) {
	if cfg.Rubric == nil {
		cfg.EnableRubrics()
	}
	rc := *cfg.Rubric
	pool, err := rubricpool.New(db, run, rc, FeatureInducer{m}, FeatureConsolidator{}, FeatureJudge{m}, nil)
	if err != nil {
		return nil, err
	}
	return &rubricShaper{pool: pool, m: m}, nil
}

func (s *rubricShaper) BeginStep(ctx context.Context, step uint64) error {
	_, err := s.pool.BeginStep(ctx, step)
	return err
}

func (s *rubricShaper) Prepare(ctx context.Context, step uint64, g model.Group, leaves []tree.Leaf) (*tree.Shaping, error) {
	trajs := make([]rubricpool.Trajectory, len(leaves))
	for i, l := range leaves {
		trajs[i] = rubricpool.Trajectory{Node: l.Node.ID, Reward: l.Reward, Turns: l.Turns,
			Outcome: s.m.ProgressScore(Positions(s.m, turnsOf(l.Turns)))}
	}
	res, err := s.pool.Prepare(ctx, step, g, trajs)
	if err != nil {
		return nil, err
	}
	return &tree.Shaping{Scores: res.Scores, Lambda: res.Lambda, Rubrics: res.Rubrics, Apply: res.Apply}, nil
}
