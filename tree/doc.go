// Package tree implements PaTR, process-scorer guided adaptive tree
// rollout, as one protocol that every writer of rollout records goes
// through.
//
// # Routing
//
// Route is the heart of the method and is pure: it takes the recorded
// process scores of a group's still-active branches at the end of an
// interval and returns, for each branch, whether it is expanded into
// children, survives to the next interval, or is pruned, with the values
// that produced the decision (score, reference, delta, rule). Because it
// reads nothing but its arguments, replay re-runs it on stored scores and
// what-if analysis re-runs it under another Config.
//
// A Decision's Action is one of the store's action words (Expand is
// store.ActionExpand, ...), and Decision.Record is the one conversion to
// the stored store.Decision, used by the coordinator, replay's what-if and
// the benchmarks alike.
//
// # The protocol
//
// A Coordinator owns every other rule of a run's rollouts and is the only
// code that writes them:
//
//	OpenStep   one group per task, B0 root branches each (idempotent for the same tasks)
//	Lease      hand a branch's current interval to a worker: sample Turns turns, then score
//	Submit     the worker's turns, env state and score — or its failure
//	           → when every active branch of a group is scored, the group is routed
//	             (decisions, pruned rewards, children forked at the parent's last turn)
//	Close      GRPO advantages over the leaves (package grpo; rubric shaping optional), group closed
//	Abandon    give up a step on record, so a checkpoint can complete it
//
// Intervals are exactly K turns per branch (fewer only where the episode
// ends or MaxTurns cuts it); a branch that ends is a leaf with its reward
// and is never scored, routed or expanded; a score before K turns, turns
// past K, a second score, a submit under a lease that is no longer the
// branch's, or from another turn index than the stored one is refused
// with an error wrapping ErrConflict (ErrTooEarly, ErrLeaseLost, ...), and
// bad input with store.ErrInvalid; either way the transaction rolls back
// and nothing is written. A branch whose policy, env or scorer fails is
// retried from its stored turns (Attempt+1) up to MaxAttempts, then
// recorded failed with the error — never as a zero reward — and left out
// of the advantages; its group still closes.
//
// # Concurrency and lifetime
//
// Coordinator methods take the caller's transaction (Submit, OpenStep,
// Close and Abandon a write one; Lease any), so a server can commit many
// workers' submits together. A Coordinator is safe for concurrent use;
// keep one per run per process. Its leases live in memory and expire after
// LeaseTTL: a crashed worker's branch is handed on, a restarted process
// starts with no leases and every stale submit is refused, so no interval
// is lost beyond its uncommitted turns and none is written twice.
//
// The Engine drives a Coordinator in-process: each wave leases every
// branch that needs work at the step, asks the BatchPolicy for all of them
// per round (up to MaxBatch per call), steps the environments and scores
// with at most Workers goroutines, encodes the turns outside the write
// lock, and submits the wave in one transaction. Env and Scorer must be
// safe for concurrent use; an Episode is used by one goroutine at a time.
//
// # Resume
//
// Everything a resume needs is on record: Resume(step) re-leases the
// step's active branches, rebuilds their histories from the store,
// restores their environments (from the node's env state, or by replaying
// the history) and continues without redoing a committed turn. A run
// records its tree config, the "tree" member of store.Run.Config (package
// runconfig; ConfigJSON writes a config with only that member), when it is
// first driven; New and NewCoordinator
// refuse a different one with ErrConfigMismatch naming the fields, unless
// AllowConfigChange says the change is deliberate. Policies and
// environments draw their randomness from the TurnKey — keyed by
// TurnKey.Branch rather than Node when several workers share a step — so
// a resumed or redistributed rollout reproduces the same trees.
package tree
