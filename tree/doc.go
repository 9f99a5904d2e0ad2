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
// model.ActionExpand, ...), and Decision.Record is the one conversion to
// the stored model.Decision, used by the coordinator, replay's what-if and
// the benchmarks alike.
//
// # The protocol
//
// A Coordinator owns every other rule of a run's rollouts and is the only
// code that writes them:
//
//	OpenStep      one group per task, B0 root branches each (idempotent; extends a step)
//	Lease         hand a branch's current interval to a worker: sample Turns turns, then score
//	Renew/Release a worker's heartbeat; give a branch back
//	Submit        the worker's turns, env state and score — or its failure
//	              → when every active branch of a group is scored, the group is routed
//	                (decisions, pruned rewards, children forked at the parent's last turn)
//	SubmitScores  process scores apart from their turns (a remote PRM); routes the same way
//	SubmitRewards deferred outcome rewards (a verifier)
//	Publish       the run's new policy version
//	Close         GRPO advantages over the leaves (package grpo; rubric shaping optional), group closed
//	Abandon       give up a step on record, so a checkpoint can complete it
//
// Intervals are exactly K turns per branch (fewer only where the episode
// ends or MaxTurns cuts it); a branch that ends is a leaf with its reward
// and is never scored, routed or expanded; a score before K turns, turns
// past K, a second score, a submit under a lease that is no longer the
// branch's, or from another turn index than the stored one is refused
// with an error wrapping ErrConflict (ErrTooEarly, ErrLeaseLost, ...), and
// bad input with model.ErrInvalid; either way the transaction rolls back
// and nothing is written. A branch whose policy, env or scorer fails is
// retried from its stored turns (Attempt+1) up to MaxAttempts, then
// recorded failed with the error — never as a zero reward — and left out
// of the advantages; its group still closes.
//
// # Leases for long work
//
// A lease is its worker's alone: its id is 128 random bits, and a submit,
// renewal or release under it must name the worker it was granted to
// (ErrNotHolder otherwise, even with the right id). It lasts LeaseTTL
// (default 30 s) from its grant or its last sign of life: a renewal
// (Renew, the worker's heartbeat, every rollout.HeartbeatEvery(TTL) = 0.4
// TTL while a tool runs) or a submit under it, partial ones included —
// turns submitted inside an interval are durable at once. A lease nobody
// renews is handed on after its TTL and a grace (LeaseGrace, at most a
// tenth of the TTL), so a dead worker's branches return within three
// heartbeats; Release hands a branch on at once.
//
// # Versions and staleness
//
// A run has a current policy version (Publish; versions only go forward,
// and the current one again is a no-op).
// Leases carry the worker's version and the run's at the grant; a worker,
// or a submitted turn, more than Config.MaxStaleness versions behind the
// run's current one is refused with ErrStale (-1, the default: no bound).
// Config.OnPublish says what a publish does to the leases in flight:
// OnPublishContinue keeps them (their turns keep their own versions, so a
// branch may span versions); OnPublishAbort voids them — their submits and
// renewals are refused, and the branches are leased again at once from
// their last committed turn, to be sampled with the new weights. replay's
// StalenessTracker measures how stale each step's turns were when written
// and its leaves' paths when their groups closed.
//
// # Deferred rewards and scores
//
// A submission that ends a branch may set RewardPending: the leaf then
// waits for its outcome reward, which any process delivers later
// (SubmitRewards: a test suite, a remote reward model). Under
// Config.RemoteScores leases never ask a worker to score; a branch through
// its interval's K turns waits for SubmitScores (a remote process reward
// model), and its group routes in the transaction that brings the
// interval's last score, exactly as if its workers had scored. Pending
// lists what a step waits for. A group is done — Close computes its
// advantages — when no branch is active and no leaf awaits its reward. A
// wait longer than Config.PendingTTLMs (default 30 min) is given up by
// Expire: a leaf whose reward never came is recorded failed, never a
// reward of 0; a branch whose score never came fails for a retry. The
// waits are timed from when this coordinator first saw them.
//
// # Dynamic sampling
//
// OpenStep extends a step whose groups are a prefix of the tasks asked
// for, and Informative splits a step's closed groups by whether their
// outcome rewards vary; Engine.RolloutInformative opens tasks until N
// groups closed informative, recording each filtered group (EvGroupFilter).
//
// # Concurrency and lifetime
//
// Coordinator methods take the caller's transaction (Submit, SubmitRewards,
// SubmitScores, OpenStep, Close, Abandon, Publish and Expire a write one;
// Lease any; Renew and Release none), so a server can commit many workers'
// submits together. A Coordinator is safe for concurrent use; keep one per
// run per process. Its leases live in memory: a crashed worker's branch is
// handed on, a restarted process starts with no leases and every stale
// submit is refused, so no interval is lost beyond its uncommitted turns
// and none is written twice.
//
// The Engine drives a Coordinator in-process with the sampling loop every
// worker runs (rollout.Sampler): each leased branch advances on its own,
// its policy moves asked for in batches with every other branch waiting
// for one (up to MaxBatch per call, larger batches split into concurrent
// calls), its env steps and scores run with at most Workers others, and
// its turns are encoded outside the write lock. Under BarrierGroup (the
// default) a group routes as soon as its own branches are through their
// interval, so a slow tool call holds up its own tree only; submits are
// committed as branches finish, many per transaction. BarrierStep keeps
// the whole step in lockstep — one wave, one commit, node ids and event
// log the same from run to run. The engine renews its leases while its
// branches sample. Env and Scorer must be safe for concurrent use; an
// Episode is used by one goroutine at a time.
//
// # Resume
//
// Everything a resume needs is on record: Resume(step) re-leases the
// step's active branches, rebuilds their histories from the store,
// restores their environments (from the node's env state, or by replaying
// the history) and continues without redoing a committed turn. A run
// records its tree config, the "tree" member of model.Run.Config (package
// runconfig; ConfigJSON writes a config with only that member), when it is
// first driven; New and NewCoordinator
// refuse a different one with ErrConfigMismatch naming the fields, unless
// AllowConfigChange says the change is deliberate. Policies and
// environments draw their randomness from the TurnKey — keyed by
// TurnKey.Branch rather than Node when several workers share a step — so
// a resumed or redistributed rollout reproduces the same trees.
package tree
