package frozenlake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// TrainConfig is the demo trainer's configuration, stored in the run's
// config so a resume continues with the same settings. The run config
// (runconfig.Config: the "tree" member and, with rubric shaping on, the
// "rubric" member) is embedded, so any reader of run configs reads the
// demo's; the other members are the trainer's own.
type TrainConfig struct {
	runconfig.Config
	Run          string  `json:"run"`
	Mode         string  `json:"mode"` // "patr" or "grpo"
	Steps        int     `json:"steps"`
	Batch        int     `json:"batch"` // tasks (groups) per step
	Seed         int64   `json:"seed"`
	Map          string  `json:"map"`
	Slippery     bool    `json:"slippery"`
	LR           float64 `json:"lr"`
	ClipEps      float64 `json:"clip_eps"`
	Epochs       int     `json:"epochs"`
	EvalEpisodes int     `json:"eval_episodes"`
	// EnvStepBudget is how many env steps the run may play (0: no
	// budget): the environment refuses moves beyond it (see Played), so the
	// run plays exactly this many unless Steps ends it first.
	EnvStepBudget int `json:"env_step_budget,omitempty"`
	// Discount is the rollouts' reward discount (see TreeEnv.Discount); 0
	// or 1 leaves the goal's reward at 1 whatever the path length.
	Discount float64 `json:"discount,omitempty"`
}

// DefaultTrainConfig returns the demo's defaults for mode "patr" or "grpo".
// PaTR uses the paper's FrozenLake settings (docs/methods.md) (B0=4, K=5, M=2, top-2,
// delta 0.5) with a width cap of 16 active branches; GRPO samples G=8
// independent trajectories, the number of leaves a PaTR tree ends with.
func DefaultTrainConfig(mode string) TrainConfig {
	c := TrainConfig{Run: "demo", Mode: mode, Steps: 30, Batch: 16, Seed: 1, Map: "4x4",
		LR: 5.0, ClipEps: 0.2, Epochs: 4, EvalEpisodes: 1000, Discount: 0.99}
	c.Tree = tree.DefaultConfig()
	c.Tree.MaxActive = 16
	if mode == "grpo" {
		c.Tree.B0 = 8
		c.Tree.NoScoring = true
	}
	return c
}

// Validate checks the trainer configuration.
func (c *TrainConfig) Validate() error {
	switch {
	case c.Mode != "patr" && c.Mode != "grpo":
		return fmt.Errorf("%w: mode %q, want patr or grpo", model.ErrInvalid, c.Mode)
	case c.Steps < 1 || c.Batch < 1:
		return fmt.Errorf("%w: steps %d and batch %d must be at least 1", model.ErrInvalid, c.Steps, c.Batch)
	case c.Epochs < 1 || !(c.LR > 0) || c.ClipEps < 0:
		return fmt.Errorf("%w: epochs %d, lr %v, clip %v", model.ErrInvalid, c.Epochs, c.LR, c.ClipEps)
	case !store.ValidRunID(c.Run):
		return fmt.Errorf("%w: run id %q: want %s", model.ErrInvalid, c.Run, store.RunIDRule)
	}
	if _, err := MapByName(c.Map); err != nil {
		return fmt.Errorf("%w: %v", model.ErrInvalid, err)
	}
	return c.Config.Validate()
}

// EnableRubrics turns rubric shaping on with rubricpool's defaults, its
// pairwise-judging order seeded from the run's seed.
func (c *TrainConfig) EnableRubrics() {
	rc := rubricpool.DefaultConfig()
	rc.Seed = c.Seed
	c.Rubric = &rc
}

// StepReport is what one training step did.
type StepReport struct {
	Step          uint64  `json:"step"`
	Groups        int     `json:"groups"`
	Leaves        int     `json:"leaves"`
	Success       float64 `json:"success"` // share of leaves that reached the goal
	MeanReward    float64 `json:"mean_reward"`
	EnvSteps      int     `json:"env_steps"` // moves the environment played in this step
	ZeroVariance  int     `json:"zero_variance_groups"`
	Unlocked      int     `json:"unlocked_groups"` // zero-variance groups shaping made informative
	CutGroups     int     `json:"cut_groups"`      // groups the budget cut, not trained on
	TotalEnvSteps int     `json:"total_env_steps"`
	// PolicyCalls is the batch-policy calls this process made for the step
	// (a resumed step counts the resumed part), MaxBatch the largest.
	PolicyCalls int `json:"policy_calls"`
	MaxBatch    int `json:"max_batch"`
}

// Report is the outcome of a training run.
type Report struct {
	Run            string       `json:"run"`
	Mode           string       `json:"mode"`
	Steps          uint64       `json:"steps"`
	FinalSuccess   float64      `json:"final_success"`   // greedy policy over EvalEpisodes episodes
	SampledSuccess float64      `json:"sampled_success"` // the policy sampled, as in rollouts
	EnvSteps       int          `json:"env_steps"`
	Nodes          int          `json:"nodes"`
	Leaves         int          `json:"leaves"`
	Bytes          int64        `json:"bytes"`
	PublicRubrics  int          `json:"public_rubrics"`
	RetiredRubrics int          `json:"retired_rubrics"`
	ZeroVariance   int          `json:"zero_variance_groups"`
	Unlocked       int          `json:"unlocked_groups"`
	PolicyCalls    int          `json:"policy_calls"` // batch-policy calls of this process, over its steps
	MaxBatch       int          `json:"max_batch"`    // the largest batch one call carried
	History        []StepReport `json:"history"`
}

// Trainer runs GRPO or PaTR on FrozenLake with every rollout in the store.
type Trainer struct {
	db     *store.DB
	cfg    TrainConfig
	m      Map
	policy *Policy
	engine *tree.Engine
	treeP  *TreePolicy
	budget *Budget // nil without EnvStepBudget
	out    io.Writer
	// ShaperFor, when set, builds the rubric shaper for a run; the demo sets
	// it when --rubrics is on.
	ShaperFor func(db *store.DB, run string, cfg TrainConfig, m Map) (tree.Shaper, error)
}

// NewTrainer prepares a trainer; progress lines go to out (nil: none).
func NewTrainer(db *store.DB, cfg TrainConfig, out io.Writer) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, _ := MapByName(cfg.Map)
	if cfg.Tree.MaxTurns == 0 || cfg.Tree.MaxTurns > m.StepLimit {
		cfg.Tree.MaxTurns = m.StepLimit
	}
	if out == nil {
		out = io.Discard
	}
	return &Trainer{db: db, cfg: cfg, m: m, out: out}, nil
}

// ErrRunExists: a fresh run was asked for an id already in the file.
var ErrRunExists = errors.New("frozenlake: run exists (use --resume or another --run)")

// Train runs (or, with resume, continues) the run and evaluates the final
// policy. A resumed run continues from its last checkpoint with the policy it
// had, finishing an interrupted step without redoing committed turns.
func (t *Trainer) Train(ctx context.Context, resume bool) (*Report, error) {
	var startStep uint64 = 1
	if resume {
		var err error
		if startStep, err = t.loadForResume(); err != nil {
			return nil, err
		}
	} else {
		if err := t.create(); err != nil {
			return nil, err
		}
		t.policy = NewPolicy(t.m.NumStates())
	}
	if err := t.initEngine(); err != nil {
		return nil, err
	}
	rep := &Report{Run: t.cfg.Run, Mode: t.cfg.Mode}
	figs, err := t.figures()
	if err != nil {
		return nil, err
	}
	total, played := 0, map[uint64]int{}
	for _, f := range figs {
		played[f.Step] = f.EnvSteps
		if f.Step < startStep {
			total += f.EnvSteps
		}
	}
	for step := startStep; step <= uint64(t.cfg.Steps); step++ {
		if t.budget != nil {
			// The open step's committed turns are spent already; a resume
			// replays only what was not committed, in the same order.
			left := t.cfg.EnvStepBudget - total - played[step]
			if left <= 0 && played[step] == 0 {
				break
			}
			t.budget.set(left)
		}
		sr, err := t.step(ctx, step)
		if err != nil {
			return nil, err
		}
		total += sr.EnvSteps
		sr.TotalEnvSteps = total
		rep.PolicyCalls += sr.PolicyCalls
		rep.MaxBatch = max(rep.MaxBatch, sr.MaxBatch)
		rep.History = append(rep.History, *sr)
		cut := ""
		if sr.CutGroups > 0 {
			cut = fmt.Sprintf("  (budget spent: %d groups cut, not trained on)", sr.CutGroups)
		}
		fmt.Fprintf(t.out, "%s step %3d  leaves %4d  success %.3f  mean reward %.3f  zero-var groups %2d  env steps %d%s\n",
			t.cfg.Mode, sr.Step, sr.Leaves, sr.Success, sr.MeanReward, sr.ZeroVariance, total, cut)
	}
	if err := t.db.UpdateRun(t.cfg.Run, func(r *store.RunTx) error {
		return r.SetRunStatus(model.RunFinished)
	}); err != nil {
		return nil, err
	}
	return t.finish(rep)
}

func (t *Trainer) create() error {
	cfgJSON, err := json.Marshal(t.cfg)
	if err != nil {
		return err
	}
	return t.db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(t.cfg.Run, cfgJSON, map[string]string{"trainer": "frozenlake-demo"})
		if errors.Is(err, model.ErrExists) {
			return fmt.Errorf("%w: %q", ErrRunExists, t.cfg.Run)
		}
		return err
	})
}

// loadForResume restores the stored config (keeping a larger --steps) and
// the policy of the last checkpoint; it returns the step to continue at.
func (t *Trainer) loadForResume() (uint64, error) {
	var stored TrainConfig
	var last uint64
	var inline []byte
	err := t.db.ViewRun(t.cfg.Run, func(r *store.RunTx) error {
		info, err := r.Info()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(info.Config, &stored); err != nil {
			return fmt.Errorf("%w: run %q config: %v", model.ErrInvalid, t.cfg.Run, err)
		}
		if stored.Config, _, err = runconfig.Of(info); err != nil {
			return err
		}
		last = info.LastStep
		if last == 0 {
			return nil
		}
		ck, err := r.Checkpoint(last)
		if err != nil {
			return err
		}
		inline = ck.Inline
		return nil
	})
	if err != nil {
		return 0, err
	}
	steps := max(t.cfg.Steps, stored.Steps)
	budget := t.cfg.EnvStepBudget
	stored.Steps = steps
	if budget > 0 {
		stored.EnvStepBudget = budget
	}
	t.cfg = stored
	if t.m, err = MapByName(stored.Map); err != nil {
		return 0, err
	}
	t.policy = NewPolicy(t.m.NumStates())
	if inline != nil {
		if err := t.policy.UnmarshalBinary(inline); err != nil {
			return 0, fmt.Errorf("%w: checkpoint of step %d: %v", store.ErrCorrupt, last, err)
		}
	}
	return last + 1, nil
}

func (t *Trainer) initEngine() error {
	t.treeP = &TreePolicy{Map: t.m, Policy: t.policy}
	if t.cfg.EnvStepBudget > 0 {
		t.budget = NewBudget(t.cfg.EnvStepBudget)
	}
	opts := tree.Options{
		Config:      t.cfg.Tree,
		BatchPolicy: t.treeP,
		// A FrozenLake move takes microseconds, and one worker steps the
		// episodes of a wave in the engine's order, so a budget cuts the
		// same moves in an uninterrupted and a resumed run, and the policy,
		// keyed by node, samples the same trees from run to run.
		Workers: 1,
		Barrier: tree.BarrierStep,
		Env:     &TreeEnv{Map: t.m, Slippery: t.cfg.Slippery, Discount: t.cfg.Discount, Budget: t.budget},
		Scorer:  &TreeScorer{Map: t.m},
	}
	if t.cfg.Rubric != nil && t.ShaperFor != nil {
		sh, err := t.ShaperFor(t.db, t.cfg.Run, t.cfg, t.m)
		if err != nil {
			return err
		}
		opts.Shaper = sh
	}
	var err error
	t.engine, err = tree.New(t.db, t.cfg.Run, opts)
	return err
}

// step rolls out (or finishes) one step, updates the policy from the
// stored advantages, and commits the new policy as the step's checkpoint in
// the transaction that marks the step complete.
func (t *Trainer) step(ctx context.Context, step uint64) (*StepReport, error) {
	var groups []model.Group
	if err := t.db.ViewRun(t.cfg.Run, func(r *store.RunTx) error {
		var err error
		groups, err = r.Groups(step)
		return err
	}); err != nil {
		return nil, err
	}
	open := false
	for _, g := range groups {
		open = open || g.Status == model.GroupOpen
	}
	t.treeP.Version = step // the policy after step-1 updates
	var res *tree.StepResult
	var err error
	switch {
	case len(groups) == 0:
		tasks := make([]rollout.Task, t.cfg.Batch)
		for i := range tasks {
			tasks[i] = rollout.Task{ID: "frozenlake-" + t.cfg.Map + "-" + strconv.Itoa(i), Prompt: "reach G from S without falling into H"}
		}
		if res, err = t.engine.Rollout(ctx, step, tasks); err != nil {
			return nil, err
		}
	case open:
		if res, err = t.engine.Resume(ctx, step); err != nil {
			return nil, err
		}
	}
	samples, sr, err := t.collect(step)
	if err != nil {
		return nil, err
	}
	if res != nil {
		sr.PolicyCalls, sr.MaxBatch = res.PolicyCalls, res.MaxBatch
	}
	for e := 0; e < t.cfg.Epochs; e++ {
		t.policy.Update(samples, t.cfg.LR, t.cfg.ClipEps)
	}
	state, err := t.policy.MarshalBinary()
	if err != nil {
		return nil, err
	}
	err = t.db.UpdateRun(t.cfg.Run, func(r *store.RunTx) error {
		return r.PutCheckpoint(model.Checkpoint{Step: step, Inline: state, Meta: map[string]string{
			"success":   strconv.FormatFloat(sr.Success, 'f', 4, 64),
			"env_steps": strconv.Itoa(sr.EnvSteps),
		}})
	})
	return sr, err
}

// collect reads the step's advantages and leaf trajectories back from the
// store: the update uses exactly what was committed, so a resumed run
// updates exactly as an uninterrupted one.
func (t *Trainer) collect(step uint64) ([]Sample, *StepReport, error) {
	var samples []Sample
	var f StepFigures
	err := t.db.ViewRun(t.cfg.Run, func(r *store.RunTx) error {
		groups, err := r.Groups(step)
		if err != nil {
			return err
		}
		for _, g := range groups {
			gf, advs, err := groupFigures(r, g)
			if err != nil {
				return err
			}
			f.add(gf)
			for _, a := range advs {
				path, err := r.Trajectory(a.Leaf)
				if err != nil {
					return err
				}
				pos := t.m.StartPos()
				for _, pt := range path {
					if len(pt.ActionTokens) == 1 && len(pt.ActionLogprobs) == 1 {
						samples = append(samples, Sample{Pos: pos, Action: Action(pt.ActionTokens[0]),
							OldLogProb: float64(pt.ActionLogprobs[0]), Advantage: a.Advantage})
					}
					if len(pt.ObservationTokens) == 1 {
						pos = int(pt.ObservationTokens[0])
					}
				}
			}
		}
		return nil
	})
	sr := &StepReport{Step: step, Groups: f.Groups, Leaves: f.Leaves, EnvSteps: f.EnvSteps,
		ZeroVariance: f.ZeroVariance, Unlocked: f.Unlocked, CutGroups: f.CutGroups}
	if f.Leaves > 0 {
		sr.Success = float64(f.Successes) / float64(f.Leaves)
		sr.MeanReward = f.RewardSum / float64(f.Leaves)
	}
	return samples, sr, err
}

// figures is RunFigures of the trainer's run.
func (t *Trainer) figures() ([]StepFigures, error) {
	var figs []StepFigures
	err := t.db.ViewRun(t.cfg.Run, func(r *store.RunTx) error {
		var err error
		figs, err = RunFigures(r)
		return err
	})
	return figs, err
}

// finish evaluates the greedy policy and gathers the run's counts.
func (t *Trainer) finish(rep *Report) (*Report, error) {
	rep.FinalSuccess = t.policy.Evaluate(t.m, t.cfg.Slippery, t.cfg.EvalEpisodes, t.cfg.Seed+1_000_003)
	rep.SampledSuccess = t.policy.EvaluateSampled(t.m, t.cfg.Slippery, t.cfg.EvalEpisodes, t.cfg.Seed+1_000_003)
	err := t.db.ViewRun(t.cfg.Run, func(r *store.RunTx) error {
		info, err := r.Info()
		if err != nil {
			return err
		}
		rep.Steps = info.LastStep
		figs, err := RunFigures(r)
		if err != nil {
			return err
		}
		for _, f := range figs {
			rep.EnvSteps += f.EnvSteps
			rep.ZeroVariance += f.ZeroVariance
			rep.Unlocked += f.Unlocked
		}
		if err := r.ForEachGroup(0, func(g model.Group) error {
			nodes, err := r.GroupNodes(g)
			for _, n := range nodes {
				rep.Nodes++
				if n.Status.Leaf() {
					rep.Leaves++
				}
			}
			return err
		}); err != nil {
			return err
		}
		rubrics, err := r.Rubrics("")
		if err != nil {
			return err
		}
		for _, rb := range rubrics {
			switch rb.Pool {
			case model.PoolPublic:
				rep.PublicRubrics++
			case model.PoolRetired:
				rep.RetiredRubrics++
			}
		}
		sizes, err := r.BucketSizes()
		for _, s := range sizes {
			rep.Bytes += s.Bytes
		}
		return err
	})
	return rep, err
}
