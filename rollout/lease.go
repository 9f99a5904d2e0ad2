package rollout

import "time"

// DefaultLeaseTTL is how long a lease lasts without a sign of life — a
// renewal (heartbeat) or a submit — unless the worker asks for another
// TTL: long enough that a missed heartbeat costs nothing, short enough
// that a dead worker's branches go to another within seconds.
const DefaultLeaseTTL = 30 * time.Second

// HeartbeatEvery is how often a worker renews a lease of the given TTL:
// often enough that one lost renewal costs nothing, seldom enough that a
// dead worker's branches are handed on within three heartbeats (its TTL
// plus the coordinator's grace, at most 1.1 TTL, is less than 3 × 0.4
// TTL).
func HeartbeatEvery(ttl time.Duration) time.Duration { return ttl * 2 / 5 }

// Lease hands one branch's current interval to one worker: sample Turns
// turns from From (fewer if the episode ends), then, when Score is set,
// score the branch, and submit. A branch whose K turns are already stored
// comes back with Turns 0 and Score set (its worker died before scoring).
//
// The lease is the worker's alone: its ID is 128 random bits, and submits,
// renewals and releases under it must name the Worker it was granted to.
// It lasts TTLMs from its grant or its last renewal (a heartbeat, or a
// submit under it); ExpiresAt is when it runs out unless renewed.
type Lease struct {
	ID        string  `json:"id"`
	Worker    string  `json:"worker"`
	Node      uint64  `json:"node"`
	Group     uint64  `json:"group"`
	Step      uint64  `json:"step"`
	Interval  int     `json:"interval"`
	Attempt   int     `json:"attempt"`
	From      int     `json:"from"`     // own-turn index of the first turn to submit (the node's stored turns)
	PathLen   int     `json:"path_len"` // turns on the path from the root so far
	Turns     int     `json:"turns"`    // turns to sample in this interval (K minus those stored, capped by MaxTurns)
	Score     bool    `json:"score"`    // a process score is due after them, unless the episode ends
	Key       TurnKey `json:"key"`      // the TurnKey of the first turn; Index and Path advance by one per turn
	Task      Task    `json:"task"`
	EnvState  []byte  `json:"env_state,omitempty"` // the node's env-state reference (Env.Restore)
	ExpiresAt int64   `json:"expires_at"`          // unix nanoseconds
	TTLMs     int64   `json:"ttl_ms"`              // how long a renewal extends it
	// PolicyVersion is the version of the weights the worker said it samples
	// with; RunVersion the run's current policy version at the grant.
	PolicyVersion uint64 `json:"policy_version"`
	RunVersion    uint64 `json:"run_version"`
}

// LeaseState answers a renewal or a release, lease by lease: Held says
// whether the worker still holds it (with its new ExpiresAt), else Reason
// says why it is gone — it expired and may have been handed on, it belongs
// to another worker, a policy version was published that voids it, or the
// coordinator never granted it (a restart).
type LeaseState struct {
	ID        string `json:"id"`
	Held      bool   `json:"held"`
	ExpiresAt int64  `json:"expires_at,omitempty"`
	Reason    string `json:"reason,omitempty"`
}
