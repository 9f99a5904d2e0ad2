package tree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/patrdb/patrdb/store"
)

// CommitMode chooses how often the engine commits.
type CommitMode int

const (
	// CommitInterval commits once per interval for the whole batch: every
	// turn, score and decision of the interval in one transaction.
	CommitInterval CommitMode = iota
	// CommitTurn also commits after every round of turns, for environments so
	// slow that losing an interval's work to a crash costs too much.
	CommitTurn
)

// Options configure an Engine.
type Options struct {
	Config Config
	Policy Policy
	Env    Env
	Scorer Scorer // required unless Config.NoScoring
	Shaper Shaper // optional: rubric shaping of the outcome rewards
	Commit CommitMode
	Eps    float64 // GRPO epsilon; 0 means DefaultEps
	Logger *slog.Logger
	// OnInterval, when set, is called after each committed interval with
	// the number of turns sampled in it (for progress displays).
	OnInterval func(step uint64, interval int, turns int)
}

// Engine grows PaTR rollout trees for one run and records every turn, score
// and decision in the store.
type Engine struct {
	db   *store.DB
	run  string
	opts Options
	log  *slog.Logger
}

// ErrNoOpenStep: Resume found nothing to resume.
var ErrNoOpenStep = errors.New("tree: no open groups to resume")

// New validates opts and returns an engine writing into run, which must
// exist.
func New(db *store.DB, run string, opts Options) (*Engine, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.Policy == nil || opts.Env == nil {
		return nil, fmt.Errorf("%w: Policy and Env are required", ErrInvalidConfig)
	}
	if opts.Scorer == nil && !opts.Config.NoScoring {
		return nil, fmt.Errorf("%w: Scorer is required unless NoScoring", ErrInvalidConfig)
	}
	if opts.Eps == 0 {
		opts.Eps = DefaultEps
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := db.View(func(tx *store.Tx) error { _, err := tx.Run(run); return err }); err != nil {
		return nil, err
	}
	return &Engine{db: db, run: run, opts: opts, log: log}, nil
}

// ConfigJSON is how a run records its tree config (store.Run.Config holds
// a JSON object with a "tree" member).
func ConfigJSON(c Config) json.RawMessage {
	b, _ := json.Marshal(c)
	return b
}

// GroupResult summarises one closed group.
type GroupResult struct {
	Group      store.Group
	Leaves     []store.Node
	Advantages []store.Advantage
}

// StepResult summarises a rollout step.
type StepResult struct {
	Step     uint64
	Groups   []GroupResult
	EnvSteps int // turns sampled by this call (restores and resumed turns excluded)
}

// Rollout grows one tree per task at step and returns when every group is
// closed with its advantages written. Committed work survives a crash;
// Resume finishes the step.
func (e *Engine) Rollout(ctx context.Context, step uint64, tasks []Task) (*StepResult, error) {
	if step == 0 {
		// Groups(0) would list every step's groups; steps start at 1.
		return nil, fmt.Errorf("%w: step 0: steps start at 1", store.ErrInvalid)
	}
	if len(tasks) == 0 {
		return &StepResult{Step: step}, nil
	}
	err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		existing, err := r.Groups(step)
		if err != nil {
			return err
		}
		if len(existing) > 0 {
			return fmt.Errorf("%w: step %d of run %q already has groups; use Resume", store.ErrExists, step, e.run)
		}
		for _, t := range tasks {
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: t.ID, Prompt: t.Prompt, Gold: t.Gold, Meta: t.Meta})
			if err != nil {
				return err
			}
			for i := 0; i < e.opts.Config.B0; i++ {
				if _, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if e.opts.Shaper != nil {
		if err := e.opts.Shaper.BeginStep(ctx, step); err != nil {
			return nil, err
		}
	}
	return e.drive(ctx, step)
}

// Resume finishes the groups left open by a crash at the run's latest
// step with open groups: it rebuilds each active branch from the store,
// restores its environment, and continues without redoing committed turns
// or duplicating nodes. It returns ErrNoOpenStep when nothing is open.
func (e *Engine) Resume(ctx context.Context) (*StepResult, error) {
	step, err := e.OpenStep()
	if err != nil {
		return nil, err
	}
	if step == 0 {
		return nil, ErrNoOpenStep
	}
	if e.opts.Shaper != nil {
		if err := e.opts.Shaper.BeginStep(ctx, step); err != nil {
			return nil, err
		}
	}
	return e.drive(ctx, step)
}

// OpenStep returns the latest step that has an open group, or 0. It walks
// the groups backwards and stops at the first step at or below the run's
// last completed step, so its cost follows the open work, not the file.
func (e *Engine) OpenStep() (uint64, error) {
	var step uint64
	err := e.db.View(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		info, err := r.Info()
		if err != nil {
			return err
		}
		err = r.ForEachGroupDesc(func(g store.Group) error {
			if g.Step <= info.LastStep {
				return errStopScan
			}
			if g.Status == store.GroupOpen {
				step = g.Step
				return errStopScan
			}
			return nil
		})
		if err == errStopScan {
			err = nil
		}
		return err
	})
	return step, err
}

var errStopScan = errors.New("stop")
