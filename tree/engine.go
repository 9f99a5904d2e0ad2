package tree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// CommitMode chooses how often the engine commits.
type CommitMode int

const (
	// CommitInterval commits once per interval for the whole wave: every
	// turn, score and decision of the interval in one transaction.
	CommitInterval CommitMode = iota
	// CommitTurn also commits after every round of turns, for environments so
	// slow that losing an interval's work to a crash costs too much.
	CommitTurn
)

// Options configure an Engine.
type Options struct {
	Config Config
	// Policy samples one branch's turn per call; BatchPolicy many branches'
	// per call. Give one (BatchPolicy wins when both are set).
	Policy      rollout.Policy
	BatchPolicy rollout.BatchPolicy
	Env         rollout.Env
	Scorer      rollout.Scorer // required unless Config.NoScoring
	Shaper      Shaper         // optional: rubric shaping of the outcome rewards
	Commit      CommitMode
	Eps         float64 // GRPO epsilon; 0 means grpo.DefaultEps

	// MaxBatch caps the requests of one BatchPolicy call (0: every branch
	// that needs a turn, across all groups of the step).
	MaxBatch int
	// Workers bounds the env steps, scorer calls, restores and encodings
	// in flight at once (0: DefaultWorkers). Episodes are stepped
	// concurrently, each by one goroutine at a time; Env and Scorer must
	// be safe for concurrent use.
	Workers int
	// MaxAttempts is how often a branch may fail before it is recorded
	// failed (0: DefaultMaxAttempts).
	MaxAttempts int
	// PolicyVersion is recorded on every turn whose Move carries none: the
	// version of the weights that sampled it.
	PolicyVersion uint64
	// Worker names the engine on its leases (default "engine").
	Worker string
	// Barrier is what a branch that finished its interval waits for
	// (default BarrierGroup: its own group only).
	Barrier Barrier
	// Linger is how long a policy batch waits for more branches while
	// others step their envs (0: rollout.DefaultLinger).
	Linger time.Duration
	// LeaseTTL is the engine's leases' TTL (0: DefaultLeaseTTL); it renews
	// them every HeartbeatEvery(LeaseTTL) while their branches sample.
	LeaseTTL time.Duration
	// DeferRewards ends each branch with its outcome reward pending: a
	// verifier or a remote reward model delivers it (Coordinator.
	// SubmitRewards), and the engine waits for it — up to the run's
	// PendingTTL — before closing the group.
	DeferRewards bool
	// Poll is how often the engine looks again while its step waits for
	// rewards or scores from elsewhere (0: 50 ms).
	Poll time.Duration
	// AllowConfigChange resumes a run whose recorded config differs from
	// Config, recording Config as the new one (see CoordinatorOptions).
	AllowConfigChange bool

	Logger *slog.Logger
	// OnInterval, when set, is called after each committed wave with the
	// number of turns sampled in it (for progress displays).
	OnInterval func(step uint64, interval int, turns int)
}

// DefaultWorkers is Options.Workers' default.
const DefaultWorkers = 8

// Engine grows PaTR rollout trees for one run in this process: it drives
// the run's Coordinator with a batch policy, concurrent environments and
// scorers, and one commit per wave.
type Engine struct {
	db     *store.DB
	run    string
	opts   Options
	log    *slog.Logger
	coord  *Coordinator
	policy rollout.BatchPolicy
}

// New validates opts and returns an engine writing into run, which must
// exist. A run that recorded a tree config must have recorded opts.Config
// (else ErrConfigMismatch, unless AllowConfigChange); a run without one
// records it.
func New(db *store.DB, run string, opts Options) (*Engine, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	policy := opts.BatchPolicy
	if policy == nil && opts.Policy != nil {
		policy = Batched(opts.Policy)
	}
	if policy == nil || opts.Env == nil {
		return nil, fmt.Errorf("%w: a Policy or BatchPolicy, and an Env, are required", ErrInvalidConfig)
	}
	if opts.Scorer == nil && !opts.Config.NoScoring && !opts.Config.RemoteScores {
		return nil, fmt.Errorf("%w: Scorer is required unless NoScoring or RemoteScores", ErrInvalidConfig)
	}
	if opts.MaxBatch < 0 || opts.Workers < 0 {
		return nil, fmt.Errorf("%w: MaxBatch %d and Workers %d must be >= 0", ErrInvalidConfig, opts.MaxBatch, opts.Workers)
	}
	if opts.Eps == 0 {
		opts.Eps = grpo.DefaultEps
	}
	if !grpo.ValidEps(opts.Eps) {
		return nil, fmt.Errorf("%w: Eps %v, want a finite value >= 0", ErrInvalidConfig, opts.Eps)
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Worker == "" {
		opts.Worker = "engine"
	}
	if opts.Poll == 0 {
		opts.Poll = 50 * time.Millisecond
	}
	if opts.Barrier != BarrierGroup && opts.Barrier != BarrierStep {
		return nil, fmt.Errorf("%w: Barrier %d", ErrInvalidConfig, opts.Barrier)
	}
	if opts.Linger < 0 || opts.Poll < 0 {
		return nil, fmt.Errorf("%w: Linger %v and Poll %v must be >= 0", ErrInvalidConfig, opts.Linger, opts.Poll)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg := opts.Config
	coord, err := NewCoordinator(db, run, &cfg, &CoordinatorOptions{MaxAttempts: opts.MaxAttempts, AllowConfigChange: opts.AllowConfigChange, LeaseTTL: opts.LeaseTTL})
	if err != nil {
		return nil, err
	}
	return &Engine{db: db, run: run, opts: opts, log: log, coord: coord, policy: policy}, nil
}

// Coordinator is the protocol the engine drives; other workers (goroutines
// of this process, or an HTTP server over the same DB) may lease from it
// too.
func (e *Engine) Coordinator() *Coordinator { return e.coord }

// GroupResult summarises one closed group.
type GroupResult struct {
	Group      model.Group
	Leaves     []model.Node
	Advantages []model.Advantage
}

// StepResult summarises a rollout step.
type StepResult struct {
	Step     uint64
	Groups   []GroupResult
	EnvSteps int // turns sampled by this call (restores and resumed turns excluded)
	// PolicyCalls is the number of BatchPolicy calls, and MaxBatch the most
	// requests one of them carried: a step of T turns in waves of B
	// branches makes about T/B calls.
	PolicyCalls int
	MaxBatch    int
	// Retries counts branch failures that were retried, Failed the
	// branches recorded failed for good (left out of the advantages).
	Retries int
	Failed  int
	// Informative and Filtered are, for RolloutInformative, the step's
	// groups that closed with and without outcome variance.
	Informative []uint64
	Filtered    []uint64
}

// Rollout opens one tree per task at step and grows them until every
// group is closed with its advantages written. Committed work survives a
// crash; Resume(step) finishes the step. Calling Rollout again for a step
// already opened with the same tasks continues it like Resume.
func (e *Engine) Rollout(ctx context.Context, step uint64, tasks []rollout.Task) (*StepResult, error) {
	if step == 0 {
		return nil, fmt.Errorf("%w: step 0: steps start at 1", model.ErrInvalid)
	}
	if len(tasks) == 0 {
		return &StepResult{Step: step}, nil
	}
	if err := e.db.Update(func(tx *store.Tx) error {
		_, err := e.coord.OpenStep(tx, step, tasks)
		return err
	}); err != nil {
		return nil, err
	}
	if e.opts.Shaper != nil {
		if err := e.opts.Shaper.BeginStep(ctx, step); err != nil {
			return nil, err
		}
	}
	return e.drive(ctx, step)
}

// Resume finishes the open groups of step left by a crash: it rebuilds
// each active branch from the store, restores its environment, and
// continues without redoing committed turns or duplicating nodes. A step
// with no open group is ErrNoOpenStep (OpenStep finds the one to resume).
func (e *Engine) Resume(ctx context.Context, step uint64) (*StepResult, error) {
	var open bool
	err := e.db.View(func(tx *store.Tx) error {
		steps, err := e.coord.OpenSteps(tx)
		for _, s := range steps {
			open = open || s == step
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !open {
		return nil, fmt.Errorf("%w: step %d of run %q", ErrNoOpenStep, step, e.run)
	}
	if e.opts.Shaper != nil {
		if err := e.opts.Shaper.BeginStep(ctx, step); err != nil {
			return nil, err
		}
	}
	return e.drive(ctx, step)
}

// OpenStep returns the earliest step past the run's last completed one
// that has an open group, or 0: the step Resume should finish first.
func (e *Engine) OpenStep() (uint64, error) {
	var step uint64
	err := e.db.View(func(tx *store.Tx) error {
		steps, err := e.coord.OpenSteps(tx)
		if len(steps) > 0 {
			step = steps[0]
		}
		return err
	})
	return step, err
}

var errStopScan = errors.New("stop")
