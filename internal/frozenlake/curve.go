package frozenlake

import (
	"encoding/json"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"math"
	"sort"

	"github.com/patrdb/patrdb/store"
)

// CurvePoint is a run's state after one training step: the env steps played
// so far and the success of the policy the step checkpointed. Point 0 is the
// untrained (uniform) policy at 0 env steps, so every curve starts at the
// same place.
type CurvePoint struct {
	Step     uint64  `json:"step"`
	EnvSteps int     `json:"env_steps"` // cumulative
	Sampled  float64 `json:"sampled_success"`
	Greedy   float64 `json:"greedy_success"`
	StepFigures
}

// Curve is a demo run's learning curve.
type Curve struct {
	Run    string       `json:"run"`
	Config TrainConfig  `json:"config"`
	Points []CurvePoint `json:"points"`
}

// Label names the training setup of the run, the same for every seed of
// it: mode, plus "+rubrics" when the rubric buffer shaped the rewards.
func (c *Curve) Label() string {
	if c.Config.Rubric != nil {
		return c.Config.Mode + "+rubrics"
	}
	return c.Config.Mode
}

// ErrNotDemoRun: the run's config is not a demo trainer's, so it has no
// policy checkpoints to evaluate.
var ErrNotDemoRun = fmt.Errorf("%w: not a FrozenLake demo run", model.ErrInvalid)

// LoadCurve reads a demo run's learning curve from the store: per completed
// step the env steps (RunFigures) and the success of that step's
// checkpointed policy over episodes evaluation episodes, sampled and
// greedy, on the run's map with the same evaluation seed as the trainer's
// final figure — so the last point equals the demo's closing line when
// episodes matches its evaluation.
func LoadCurve(r *store.RunTx, episodes int) (*Curve, error) {
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	c := &Curve{Run: r.ID()}
	if err := json.Unmarshal(info.Config, &c.Config); err != nil || (c.Config.Mode != "patr" && c.Config.Mode != "grpo") {
		return nil, fmt.Errorf("%w: run %q", ErrNotDemoRun, r.ID())
	}
	m, err := MapByName(c.Config.Map)
	if err != nil {
		return nil, fmt.Errorf("%w: run %q: %v", ErrNotDemoRun, r.ID(), err)
	}
	figs, err := RunFigures(r)
	if err != nil {
		return nil, err
	}
	evalSeed := c.Config.Seed + 1_000_003
	p := NewPolicy(m.NumStates())
	c.Points = append(c.Points, CurvePoint{
		Sampled: p.EvaluateSampled(m, c.Config.Slippery, episodes, evalSeed),
		Greedy:  p.Evaluate(m, c.Config.Slippery, episodes, evalSeed)})
	total := 0
	for _, f := range figs {
		total += f.EnvSteps
		if f.Step > info.LastStep {
			break // an open step has no checkpoint yet
		}
		ck, err := r.Checkpoint(f.Step)
		if err != nil {
			return nil, err
		}
		if err := p.UnmarshalBinary(ck.Inline); err != nil {
			return nil, fmt.Errorf("%w: run %q checkpoint %d: %v", store.ErrCorrupt, r.ID(), f.Step, err)
		}
		if p.NumStates() != m.NumStates() {
			return nil, fmt.Errorf("%w: run %q checkpoint %d covers %d cells, the map %d", store.ErrCorrupt, r.ID(), f.Step, p.NumStates(), m.NumStates())
		}
		c.Points = append(c.Points, CurvePoint{Step: f.Step, EnvSteps: total, StepFigures: f,
			Sampled: p.EvaluateSampled(m, c.Config.Slippery, episodes, evalSeed),
			Greedy:  p.Evaluate(m, c.Config.Slippery, episodes, evalSeed)})
	}
	return c, nil
}

// MeanSD returns the mean and the sample standard deviation (0 for fewer
// than two values) of xs; both are 0 for no values.
func MeanSD(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	if len(xs) > 1 {
		sd = math.Sqrt(sd / float64(len(xs)-1))
	} else {
		sd = 0
	}
	return mean, sd
}

// BandPoint is the mean ± sd over seeds of a figure at one env-step count.
type BandPoint struct {
	EnvSteps float64 `json:"env_steps"`
	Mean     float64 `json:"mean"`
	SD       float64 `json:"sd"`
}

// Band is one training setup's curve over seeds.
type Band struct {
	Label string   `json:"label"`
	Runs  []string `json:"runs"`
	// Sampled and Greedy success, and zero-variance groups per step, at
	// each env-step count where any of the runs has a point, up to the
	// smallest final count among them (so every mean is over all seeds).
	// Runs differ in how many env steps each step takes, so each run's
	// figure is interpolated linearly between its own points.
	Sampled []BandPoint `json:"sampled_success"`
	Greedy  []BandPoint `json:"greedy_success"`
	// ZeroVariance is the share of a step's groups (those the budget did
	// not cut) whose rewards had zero variance.
	ZeroVariance []BandPoint `json:"zero_variance_share"`
	// Over the whole of each run up to the band's end: the zero-variance
	// groups and the share of them rubric shaping made informative.
	TotalZeroVariance BandPoint `json:"total_zero_variance_groups"`
	UnlockedShare     BandPoint `json:"unlocked_share"`
}

// End is the band's last env-step count (equal budgets: every run's).
func (b *Band) End() float64 {
	if len(b.Sampled) == 0 {
		return 0
	}
	return b.Sampled[len(b.Sampled)-1].EnvSteps
}

// Bands groups curves by Label, in the order labels first appear, and
// averages each group over its runs.
func Bands(curves []*Curve) []Band {
	var order []string
	by := map[string][]*Curve{}
	for _, c := range curves {
		l := c.Label()
		if by[l] == nil {
			order = append(order, l)
		}
		by[l] = append(by[l], c)
	}
	out := make([]Band, 0, len(order))
	for _, l := range order {
		out = append(out, band(l, by[l]))
	}
	return out
}

func band(label string, cs []*Curve) Band {
	b := Band{Label: label}
	end := math.Inf(1)
	var xs []float64
	for _, c := range cs {
		b.Runs = append(b.Runs, c.Run)
		end = math.Min(end, float64(c.Points[len(c.Points)-1].EnvSteps))
		for _, p := range c.Points {
			xs = append(xs, float64(p.EnvSteps))
		}
	}
	sort.Float64s(xs)
	var zv, share []float64
	for _, c := range cs {
		z, u := 0, 0
		for _, p := range c.Points[1:] {
			if float64(p.EnvSteps) <= end {
				z += p.ZeroVariance
				u += p.Unlocked
			}
		}
		zv = append(zv, float64(z))
		if z > 0 {
			share = append(share, float64(u)/float64(z))
		}
	}
	b.TotalZeroVariance.Mean, b.TotalZeroVariance.SD = MeanSD(zv)
	b.UnlockedShare.Mean, b.UnlockedShare.SD = MeanSD(share)
	b.TotalZeroVariance.EnvSteps, b.UnlockedShare.EnvSteps = end, end
	// The zero-variance share belongs to a step's trained groups: not to
	// the untrained policy of point 0, nor to a step the budget cut whole.
	trained := func(p CurvePoint) bool { return p.Step > 0 && p.Groups > p.CutGroups }
	all := func(CurvePoint) bool { return true }
	figures := []struct {
		dst  *[]BandPoint
		keep func(CurvePoint) bool
		val  func(CurvePoint) float64
	}{
		{&b.Sampled, all, func(p CurvePoint) float64 { return p.Sampled }},
		{&b.Greedy, all, func(p CurvePoint) float64 { return p.Greedy }},
		{&b.ZeroVariance, trained, func(p CurvePoint) float64 {
			return float64(p.ZeroVariance) / float64(p.Groups-p.CutGroups)
		}},
	}
	for _, f := range figures {
		pts := make([][]CurvePoint, len(cs))
		lo := math.Inf(-1)
		for k, c := range cs {
			for _, p := range c.Points {
				if f.keep(p) {
					pts[k] = append(pts[k], p)
				}
			}
			if len(pts[k]) == 0 {
				lo = math.Inf(1) // a run without such points: no band
				break
			}
			lo = math.Max(lo, float64(pts[k][0].EnvSteps))
		}
		for i, x := range xs {
			if x < lo || x > end || (i > 0 && x == xs[i-1]) {
				continue
			}
			vals := make([]float64, len(cs))
			for k := range cs {
				vals[k] = interpolate(pts[k], x, f.val)
			}
			m, sd := MeanSD(vals)
			*f.dst = append(*f.dst, BandPoint{EnvSteps: x, Mean: m, SD: sd})
		}
	}
	return b
}

// interpolate is val at env-step count x, linear between the two points of
// pts around it (pts sorted by EnvSteps, x within their range).
func interpolate(pts []CurvePoint, x float64, val func(CurvePoint) float64) float64 {
	i := sort.Search(len(pts), func(i int) bool { return float64(pts[i].EnvSteps) >= x })
	switch {
	case i == len(pts):
		return val(pts[len(pts)-1])
	case i == 0 || float64(pts[i].EnvSteps) == x:
		return val(pts[i])
	}
	a, b := pts[i-1], pts[i]
	t := (x - float64(a.EnvSteps)) / float64(b.EnvSteps-a.EnvSteps)
	return val(a) + t*(val(b)-val(a))
}
