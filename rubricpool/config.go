package rubricpool

import (
	"errors"
	"fmt"
	"math"
)

// Config holds the ARBOR knobs. The defaults are the values docs/methods.md
// fixes; several come from secondary notes on the paper, which is why they
// are exposed rather than hard-coded. Its json names are how a run records
// it: the "rubric" member of model.Run.Config (package runconfig).
type Config struct {
	// VarMin is δ_v: a draft whose scores over its group have population
	// variance below this does not separate the group and is not admitted; an
	// activation below it extends a public rubric's low-variance streak.
	VarMin float64 `json:"var_min"`
	// RhoMin is ρ_min: the Pearson correlation with F1 a draft needs for
	// admission, and the running correlation below which a public rubric
	// retires (once it has MinActivations).
	RhoMin float64 `json:"rho_min"`
	// ConsolidateAt is K_consol: the candidate-pool size that triggers
	// consolidation into public rubrics.
	ConsolidateAt int `json:"consolidate_at"`
	// RetireStreak is k: a rubric retires as mastered when its low-variance
	// streak exceeds it. The streak counts consecutive groups the rubric
	// scored with win-rate variance below VarMin (a group it separates
	// resets it), so with many groups per step it can pass k within a step.
	RetireStreak int `json:"retire_streak"`
	// MinActivations guards the correlation-based retirement: a rubric is not
	// judged on its correlation before it has been activated this many times,
	// because a handful of groups gives a noisy estimate.
	MinActivations int `json:"min_activations"`
	// Active is the number of public rubrics activated per step.
	Active int `json:"active"`
	// Lambda is λ in R = R_base + λ·score.
	Lambda float64 `json:"lambda"`
	// DedupJaccard is the word-3-shingle Jaccard similarity at or above which
	// two rubric texts are near-duplicates.
	DedupJaccard float64 `json:"dedup_jaccard"`
	// Seed drives the A/B order randomisation of pairwise judging.
	Seed int64 `json:"seed"`
}

// DefaultConfig returns the defaults of docs/methods.md with MinActivations 3
// and Seed 0.
func DefaultConfig() Config {
	return Config{
		VarMin:         0.01,
		RhoMin:         0.2,
		ConsolidateAt:  8,
		RetireStreak:   5,
		MinActivations: 3,
		Active:         2,
		Lambda:         0.1,
		DedupJaccard:   0.8,
	}
}

// Validate reports every bad field at once (so a user fixes a config in one
// round trip); the returned error wraps ErrInvalidConfig. A nil error means
// the config is usable.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, value any, want string) {
		errs = append(errs, fmt.Errorf("%w: %s = %v, want %s", ErrInvalidConfig, field, value, want))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

	if !finite(c.VarMin) || c.VarMin < 0 {
		bad("VarMin", c.VarMin, "a finite value >= 0")
	}
	if !finite(c.RhoMin) || c.RhoMin < -1 || c.RhoMin > 1 {
		bad("RhoMin", c.RhoMin, "a value in [-1, 1]")
	}
	if c.ConsolidateAt < 1 {
		bad("ConsolidateAt", c.ConsolidateAt, ">= 1")
	}
	if c.RetireStreak < 0 {
		bad("RetireStreak", c.RetireStreak, ">= 0")
	}
	if c.MinActivations < 0 {
		bad("MinActivations", c.MinActivations, ">= 0")
	}
	if c.Active < 1 {
		bad("Active", c.Active, ">= 1")
	}
	// A negative λ would reward what the rubrics penalise.
	if !finite(c.Lambda) || c.Lambda < 0 {
		bad("Lambda", c.Lambda, "a finite value >= 0")
	}
	// 0 would make every pair of texts duplicates; NaN compares false with
	// everything and would silently disable deduplication.
	if !finite(c.DedupJaccard) || c.DedupJaccard <= 0 || c.DedupJaccard > 1 {
		bad("DedupJaccard", c.DedupJaccard, "a value in (0, 1]")
	}
	return errors.Join(errs...)
}
