package rollout

import (
	"github.com/patrdb/patrdb/model"
)

// Submission is a worker's report on the branch it leased: the turns it
// sampled (from own-turn index From), the env state after them, and the
// process score once the interval's turns are all in — or the error that
// stopped it. A worker may submit an interval in parts (turns now, more
// turns or the score later) while its lease is current.
type Submission struct {
	Lease string `json:"lease"`
	// Worker is the worker the lease was granted to: a lease is refused to
	// anyone else, even with its id.
	Worker   string       `json:"worker"`
	Node     uint64       `json:"node"`
	From     int          `json:"from"`
	Turns    []model.Turn `json:"turns,omitempty"`
	EnvState []byte       `json:"env_state,omitempty"`
	// Score is the branch's process score in [0,1], due exactly when the
	// interval's K turns are stored and the episode has not ended.
	Score *float64 `json:"score,omitempty"`
	// Reward is the outcome reward of a branch these turns end (the last
	// one is done, or MaxTurns is reached); without it the leaf gets the
	// sum of its path's turn rewards. A pruned branch always gets that sum.
	Reward *float64 `json:"reward,omitempty"`
	// RewardPending defers the outcome reward of a branch these turns end
	// (its episode ends, or MaxTurns cuts it): a verifier or a remote reward
	// model submits it later, from any process (SubmitRewards), and the
	// group closes once every leaf has one. On turns that do not end the
	// branch it has no effect, so a worker may set it on every submit.
	RewardPending bool `json:"reward_pending,omitempty"`
	// Error, when set, reports that the branch's policy, env or scorer
	// failed: no turns go with it. The branch is retried (from its stored
	// turns, Attempt+1) until MaxAttempts, then recorded failed with this
	// text; a failed branch is never a leaf and never a zero reward.
	Error string `json:"error,omitempty"`
}

// SubmitResult is the state of one submitted branch afterwards.
type SubmitResult struct {
	Node    uint64           `json:"node"`
	Status  model.NodeStatus `json:"status"`
	Turns   int              `json:"turns"` // own turns stored
	Attempt int              `json:"attempt"`
	Retry   bool             `json:"retry,omitempty"` // a failure that will be retried: lease the branch again
}

// RoutedDecision is a routing decision as recorded, with the ids of the
// children an expansion created.
type RoutedDecision struct {
	Decision
	ChildIDs []uint64 `json:"child_ids,omitempty"`
}

// Routing is one group's interval, routed because a submit completed it.
type Routing struct {
	Step      uint64           `json:"step"`
	Group     uint64           `json:"group"`
	Interval  int              `json:"interval"` // the interval routed
	Decisions []RoutedDecision `json:"decisions,omitempty"`
	Active    []uint64         `json:"active"` // the group's active branches for the next interval
}

// Submitted answers Submit.
type Submitted struct {
	Results []SubmitResult `json:"results"`
	Routed  []Routing      `json:"routed,omitempty"`
	// Done lists the groups this submit left without an active branch:
	// every leaf has its reward, and Close computes the advantages.
	Done []uint64 `json:"done,omitempty"`
}

// RewardSubmission delivers a finished branch's deferred outcome reward,
// or the error that stopped the verifier computing it (the leaf is then
// recorded failed: never a zero reward). It needs no lease: any process
// may submit it.
type RewardSubmission struct {
	Node   uint64   `json:"node"`
	Reward *float64 `json:"reward,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// ScoreSubmission delivers a branch's process score for an interval,
// apart from its turns (a remote process reward model), or the error that
// stopped the scorer (the branch is retried, then failed). It needs no
// lease; Interval must be the branch's group's current one.
type ScoreSubmission struct {
	Node     uint64   `json:"node"`
	Interval int      `json:"interval"`
	Score    *float64 `json:"score,omitempty"`
	Error    string   `json:"error,omitempty"`
}
