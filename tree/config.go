package tree

import (
	"errors"
	"fmt"
	"time"
)

// PruneRule selects the reference value a branch's score is compared against.
type PruneRule string

const (
	// PruneMax prunes a branch when s < max_j s_j − Delta (the seed rule):
	// it keeps only branches close to the current best one.
	PruneMax PruneRule = "max"
	// PruneMedian prunes a branch when s < median_j s_j − Delta: it is less
	// sensitive to a single optimistic score than PruneMax.
	PruneMedian PruneRule = "median"
)

// Config holds the PaTR parameters of one run. The zero value is not valid
// (PruneRule is empty, M and K are 0); start from DefaultConfig.
type Config struct {
	B0          int       `json:"b0"`           // initial branches per task (default 4)
	K           int       `json:"k"`            // turns per interval (default 5)
	M           int       `json:"m"`            // children per expansion (default 2)
	TopExpand   int       `json:"top_expand"`   // branches expanded per interval (default 2)
	Delta       float64   `json:"delta"`        // prune margin (default 0.5)
	PruneRule   PruneRule `json:"prune_rule"`   // default PruneMax
	RepeatPrune int       `json:"repeat_prune"` // prune after this many identical actions in a row; 0 disables (default 6)
	MaxTurns    int       `json:"max_turns"`    // turn cap per root-to-leaf path; 0 = no cap (default 100)
	MaxActive   int       `json:"max_active"`   // width cap on active branches per group; 0 = no cap (default 0)
	Seed        int64     `json:"seed"`
	NoScoring   bool      `json:"no_scoring"` // GRPO mode: no scorer, no routing; every branch runs to the end (B0 = G)

	// Asynchronous rollouts (the package doc's "Versions and staleness" and
	// "Deferred rewards and scores"). The defaults keep the synchronous
	// protocol: no staleness bound, in-flight work continues across a
	// publish, workers score inline.
	MaxStaleness int       `json:"max_staleness"` // policy versions a lease or a turn may lag the run's current one; -1: no bound (default)
	OnPublish    OnPublish `json:"on_publish"`    // what a published version does to leases in flight (default OnPublishContinue)
	// RemoteScores: process scores arrive apart from the turns, from any
	// process (Coordinator.SubmitScores, a remote PRM); leases never ask a
	// worker to score, and a branch waits for its score after its K turns.
	RemoteScores bool `json:"remote_scores"`
	// PendingTTLMs bounds how long a deferred reward or a remote score
	// may take: a leaf whose reward is later is recorded failed (never 0);
	// a branch whose score is later fails and is retried (default 30 min).
	PendingTTLMs int64 `json:"pending_ttl_ms"`
}

// OnPublish is what publishing a new policy version does to branches in
// flight.
type OnPublish string

const (
	// OnPublishContinue: leases stand; turns sampled with the old weights
	// are accepted while they are within MaxStaleness and keep their own
	// versions (partial rollout: a branch may span versions).
	OnPublishContinue OnPublish = "continue"
	// OnPublishAbort: every lease granted before the publish is void — its
	// submits are refused with ErrLeaseLost — and its branch is leased
	// again from its last committed turn, to be sampled with the new
	// weights. Committed turns keep their versions.
	OnPublishAbort OnPublish = "abort"
)

// Bounds of the asynchronous settings.
const (
	MaxMaxStaleness   = 1 << 20
	MaxPendingTTL     = 7 * 24 * time.Hour
	DefaultPendingTTL = 30 * time.Minute
)

// PendingTTL is PendingTTLMs as a duration.
func (c Config) PendingTTL() time.Duration {
	return time.Duration(c.PendingTTLMs) * time.Millisecond
}

// StaleBy reports whether a turn or worker at version v is too stale for a
// run at version current: more than MaxStaleness behind (never with no
// bound; a version ahead of the run's is not stale).
func (c Config) StaleBy(current, v uint64) bool {
	return c.MaxStaleness >= 0 && current > v && current-v > uint64(c.MaxStaleness)
}

// Upper bounds of the config numbers. They are far above any run the
// methods describe (B0=4, M=2, K up to 13, 50 turns) and low enough that
// one group stays a bounded amount of work: opening a group writes B0
// nodes and routing writes up to TopExpand·M in one transaction, which
// every other writer of the file waits for.
const (
	MaxB0      = 1024    // initial branches per group
	MaxM       = 64      // children per expansion
	MaxK       = 1000    // turns per interval
	MaxWidth   = 4096    // TopExpand and MaxActive
	MaxTurnCap = 100_000 // MaxTurns and RepeatPrune
	MaxDelta   = 1e6     // prune margin (anything >= 1 already prunes nothing by score)
	// MaxChildren caps the children one routing creates (TopExpand × M),
	// all in the transaction of the submit that completes the interval.
	MaxChildren = 8192
)

// DefaultConfig returns the defaults of docs/methods.md, which follow the
// secondary reports of the PaTR paper (see docs/methods.md). They are defaults to
// expose, not constants: every field can be overridden.
func DefaultConfig() Config {
	return Config{
		B0:          4,
		K:           5,
		M:           2,
		TopExpand:   2,
		Delta:       0.5,
		PruneRule:   PruneMax,
		RepeatPrune: 6,
		MaxTurns:    100,
		MaxActive:   0,

		MaxStaleness: -1,
		OnPublish:    OnPublishContinue,
		PendingTTLMs: DefaultPendingTTL.Milliseconds(),
	}
}

// Validate reports every field that is out of range, so a user fixing a
// config sees all problems at once. Each reported problem wraps
// ErrInvalidConfig and names the field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...)))
	}
	between := func(field string, v, lo, hi int, note string) {
		if v < lo || v > hi {
			bad(field, "= %d, want %d..%d%s", v, lo, hi, note)
		}
	}
	between("B0", c.B0, 1, MaxB0, "")
	between("K", c.K, 1, MaxK, "")
	between("M", c.M, 1, MaxM, "")
	between("TopExpand", c.TopExpand, 0, MaxWidth, "")
	if c.TopExpand*c.M > MaxChildren {
		bad("TopExpand", "× M = %d children in one routing, want at most %d", c.TopExpand*c.M, MaxChildren)
	}
	// Delta >= 1 is legal: scores lie in [0,1], so it disables pruning by
	// score (what-if analyses ask for it).
	if !(c.Delta >= 0 && c.Delta <= MaxDelta) {
		bad("Delta", "= %v, want a finite value 0..%v", c.Delta, float64(MaxDelta))
	}
	switch c.PruneRule {
	case PruneMax, PruneMedian:
	default:
		bad("PruneRule", "= %q, want %q or %q", c.PruneRule, PruneMax, PruneMedian)
	}
	between("RepeatPrune", c.RepeatPrune, 0, MaxTurnCap, " (0 disables)")
	between("MaxTurns", c.MaxTurns, 0, MaxTurnCap, " (0 = no cap)")
	between("MaxActive", c.MaxActive, 0, MaxWidth, " (0 = no cap)")
	// A cap below B0 could not even hold the initial branches.
	if c.MaxActive != 0 && c.MaxActive < c.B0 {
		bad("MaxActive", "= %d, want 0 (no cap) or >= B0 (%d)", c.MaxActive, c.B0)
	}
	between("MaxStaleness", c.MaxStaleness, -1, MaxMaxStaleness, " (-1: no bound)")
	switch c.OnPublish {
	case OnPublishContinue, OnPublishAbort:
	default:
		bad("OnPublish", "= %q, want %q or %q", c.OnPublish, OnPublishContinue, OnPublishAbort)
	}
	if c.PendingTTLMs < 1 || c.PendingTTLMs > MaxPendingTTL.Milliseconds() {
		bad("PendingTTLMs", "= %d, want 1..%d", c.PendingTTLMs, MaxPendingTTL.Milliseconds())
	}
	if c.RemoteScores && c.NoScoring {
		bad("RemoteScores", "is set under NoScoring, which scores nothing")
	}
	return errors.Join(errs...)
}
