package rubricpool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Pool is the rubric buffer of one run, kept entirely in the store: it
// holds no state of its own between calls, so a Pool built after a crash
// over the reopened file decides exactly as the lost one would have. The
// caller must pass the same Config on resume (trainers record it in the
// run's config).
//
// Calls for one run must be serialised: BeginStep, then per group Prepare
// followed by Apply of its result, one group at a time. Apply detects a
// violation (ErrStale) rather than mixing decisions.
type Pool struct {
	db      *store.DB
	run     string
	cfg     Config
	inducer Inducer
	con     Consolidator
	judge   Judge
	log     *slog.Logger
}

// New returns the pool of run, which must exist. All three interfaces are
// required; a nil logger discards.
func New(db *store.DB, run string, cfg Config, ind Inducer, con Consolidator, judge Judge, logger *slog.Logger) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: nil DB", ErrInvalidConfig)
	}
	if ind == nil || con == nil || judge == nil {
		return nil, fmt.Errorf("%w: Inducer, Consolidator and Judge are all required", ErrInvalidConfig)
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := db.View(func(tx *store.Tx) error { _, err := tx.Run(run); return err }); err != nil {
		return nil, err
	}
	return &Pool{db: db, run: run, cfg: cfg, inducer: ind, con: con, judge: judge, log: logger}, nil
}

// Config returns the pool's configuration.
func (p *Pool) Config() Config { return p.cfg }

// Run returns the id of the pool's run.
func (p *Pool) Run() string { return p.run }

// BeginStep activates the step's public rubrics and returns their ids in
// id order. It selects Active eligible public rubrics (SelectActive: the
// highest running correlation, then least-recently activated) and records
// the activation (Activations+1, LastActivation = step, one EvActivate
// event) in one transaction.
//
// A public rubric is eligible at step s when it became public before s
// (CreatedStep < s), so rubrics consolidated during a step wait for the
// next one. That makes BeginStep idempotent without any extra record: a
// step has begun exactly when some rubric (in any pool, since an active
// rubric may have retired since) has LastActivation == s, or when no
// rubric was eligible — and nothing a step does can make a rubric eligible
// for that same step. Calling it again for a begun step returns the same
// set and writes nothing, so the trainer may call it on every resume.
func (p *Pool) BeginStep(ctx context.Context, step uint64) ([]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if step == 0 {
		return nil, inputf("step 0: steps start at 1")
	}
	var ids []uint64
	begun := false
	// A read-only look first, so resuming a begun step costs no commit.
	err := p.db.View(func(tx *store.Tx) error {
		rubrics, err := p.rubrics(tx)
		if err != nil {
			return err
		}
		ids, begun, err = stepBegun(rubrics, step)
		return err
	})
	if err != nil || begun {
		return ids, err
	}
	var sel []uint64
	err = p.db.UpdateRun(p.run, func(r *store.RunTx) error {
		rubrics, err := r.Rubrics("")
		if err != nil {
			return err
		}
		// Checked again: another caller may have begun the step since.
		if ids, begun, err = stepBegun(rubrics, step); err != nil || begun {
			return err
		}
		eligible := eligibleAt(rubrics, step)
		usage := make([]RubricUsage, len(eligible))
		byID := make(map[uint64]model.Rubric, len(eligible))
		for i, rb := range eligible {
			usage[i] = usageOf(rb)
			byID[rb.ID] = rb
		}
		sel = SelectActive(usage, p.cfg.Active)
		pl := ActivatePayload{Rubrics: sel}
		for _, rb := range eligible {
			pl.Eligible = append(pl.Eligible, rb.ID)
		}
		for _, id := range sel {
			rb := byID[id]
			rho, ok := UsageCorr(rb.Usage).Rho()
			pl.Rho = append(pl.Rho, rho)
			pl.RhoDefined = append(pl.RhoDefined, ok)
			pl.LastActivation = append(pl.LastActivation, rb.Usage.LastActivation)
			rb.Usage.Activations++
			rb.Usage.LastActivation = int64(step)
			if err := r.UpdateRubric(rb); err != nil {
				return err
			}
		}
		_, err = r.AppendEvent(EvActivate, step, 0, 0, 0, pl)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !begun {
		p.log.Debug("rubricpool: step begun", "run", p.run, "step", step, "active", sel)
		ids = slices.Sorted(slices.Values(sel))
	}
	return ids, nil
}

// stepBegun reports whether step has begun (see BeginStep) and, if so, the
// rubrics it activated in id order. A step before the latest activation is
// ErrInvalidInput: steps only move forward.
func stepBegun(rubrics []model.Rubric, step uint64) ([]uint64, bool, error) {
	var ids []uint64
	latest := int64(-1)
	for _, rb := range rubrics {
		latest = max(latest, rb.Usage.LastActivation)
		if rb.Usage.LastActivation == int64(step) {
			ids = append(ids, rb.ID)
		}
	}
	if latest > int64(step) {
		return nil, false, inputf("step %d comes before step %d, which has begun", step, latest)
	}
	if len(ids) > 0 {
		return ids, true, nil
	}
	return nil, len(eligibleAt(rubrics, step)) == 0, nil
}

// eligibleAt returns the public rubrics that became public before step.
func eligibleAt(rubrics []model.Rubric, step uint64) []model.Rubric {
	var out []model.Rubric
	for _, rb := range rubrics {
		if rb.Pool == model.PoolPublic && rb.CreatedStep < step {
			out = append(out, rb)
		}
	}
	return out
}

func (p *Pool) rubrics(tx *store.Tx) ([]model.Rubric, error) {
	r, err := tx.Run(p.run)
	if err != nil {
		return nil, err
	}
	return r.Rubrics("")
}

// UsageCorr returns the running correlation sums stored in a rubric's
// usage statistics.
func UsageCorr(u model.RubricUsage) Corr {
	return Corr{N: u.N, SumX: u.SumX, SumY: u.SumY, SumXY: u.SumXY, SumXX: u.SumXX, SumYY: u.SumYY}
}

// Rho is a rubric's running Pearson correlation between its win rates and
// the outcome, from the stored sums; false when undefined (fewer than two
// observations, or constant scores or outcomes).
func Rho(u model.RubricUsage) (float64, bool) { return UsageCorr(u).Rho() }

func setCorr(u *model.RubricUsage, c Corr) {
	u.N, u.SumX, u.SumY, u.SumXY, u.SumXX, u.SumYY = c.N, c.SumX, c.SumY, c.SumXY, c.SumXX, c.SumYY
}

func usageOf(rb model.Rubric) RubricUsage {
	return RubricUsage{ID: rb.ID, Corr: UsageCorr(rb.Usage), LastActivation: rb.Usage.LastActivation, Activations: rb.Usage.Activations}
}

// PoolState is the rubric buffer of a run split by pool, each in id order.
type PoolState struct {
	Candidate []model.Rubric `json:"candidate"`
	Public    []model.Rubric `json:"public"`
	Retired   []model.Rubric `json:"retired"`
	Merged    []model.Rubric `json:"merged"`
}

// Len is the number of rubrics in all four pools.
func (s PoolState) Len() int {
	return len(s.Candidate) + len(s.Public) + len(s.Retired) + len(s.Merged)
}

// Load reads a run's pools inside a transaction; commands that have no
// Pool (no inducer or judge at hand) use it directly.
func Load(r *store.RunTx) (PoolState, error) {
	all, err := r.Rubrics("")
	if err != nil {
		return PoolState{}, err
	}
	var s PoolState
	for _, rb := range all {
		switch rb.Pool {
		case model.PoolCandidate:
			s.Candidate = append(s.Candidate, rb)
		case model.PoolPublic:
			s.Public = append(s.Public, rb)
		case model.PoolRetired:
			s.Retired = append(s.Retired, rb)
		case model.PoolMerged:
			s.Merged = append(s.Merged, rb)
		}
	}
	return s, nil
}

// Snapshot reads the pool's current state.
func (p *Pool) Snapshot() (PoolState, error) {
	var s PoolState
	err := p.db.ViewRun(p.run, func(r *store.RunTx) error {
		var err error
		s, err = Load(r)
		return err
	})
	return s, err
}
