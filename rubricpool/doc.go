// Package rubricpool implements ARBOR, the adaptive rubric buffer: one memory
// of natural-language process rubrics shared by every query of a training
// run, used to shape rewards where the outcome alone gives no signal (a group
// whose trajectories all get the same reward has zero GRPO advantage).
//
// A rubric's lifecycle, and the pure building block each stage uses:
//
//  1. Anchors. In a query group, tau+ is the trajectory with the highest
//     token-level F1 against the gold answer (TokenF1), tau-worst the lowest,
//     tau-hard the best of the rest (PickAnchors). An inducer contrasts
//     (tau+, tau-worst) and (tau+, tau-hard) and drafts a few rubrics.
//  2. Admission. A draft enters the candidate pool only if its scores over
//     the group separate it (Variance ≥ VarMin) and agree with the outcome
//     (Pearson with F1 ≥ RhoMin). A near-duplicate of an existing candidate
//     or public rubric (NearDuplicate: word-3-shingle Jaccard of NormalizeRubric text ≥
//     DedupJaccard) adds support to it instead of becoming a new rubric.
//  3. Consolidation. At ConsolidateAt candidates a consolidator abstracts
//     them into general public rubrics, deduplicated against the public pool;
//     the consumed drafts become merged, keeping their lineage.
//  4. Activation. Each step activates Active public rubrics (SelectActive):
//     the one with the highest running correlation (Corr), then the least
//     recently activated, so the whole pool keeps being measured.
//  5. Sparse pairwise scoring. Per active rubric, a judge compares only
//     neighbours in base-reward order plus the diameter pair (PairSet), at
//     most |G| comparisons, with the A/B order randomised from the seed
//     (Swap). A trajectory's score is its win rate, ties counting ½
//     (WinRates).
//  6. Shaping. Win rates are averaged over active rubrics and centred within
//     the group (GroupScore, Centre); R = R_base + Lambda·score (Shape), and
//     the group's advantages follow (GRPO).
//  7. Retirement. A public rubric retires as mastered when its low-variance
//     streak exceeds RetireStreak, or as uncorrelated when, after
//     MinActivations activations, its running correlation falls below RhoMin
//     (RetireReason).
//
// The functions above are pure and deterministic: the same inputs give the
// same anchors, pairs, A/B orders and scores, so a resumed or replayed run
// reproduces every decision. Persistent state (Corr sums, activation steps)
// is plain data the store records exactly.
//
// # The Pool over the store
//
// Pool runs that lifecycle for one run with every rubric a model.Rubric
// record (pools candidate → public | merged | retired, public → retired).
// It keeps no state between calls: each call reads the pool from the store,
// so a Pool built over a reopened file after a crash decides exactly as the
// lost one would have, given the same Config. The LLM work is behind
// Inducer, Consolidator and Judge; their answers are validated (an invalid
// Outcome, an empty draft, a consolidation naming an unknown or
// non-candidate draft is an *OutputError, and nothing is written) and
// recorded in events (EvJudge, EvInduce, EvAdmit, EvReject, EvSupport,
// EvConsolidate, EvScore, EvActivate; the store adds rubric.put, .update
// and .move with the record after each change).
//
// Per step, BeginStep(step) selects and records the step's active rubrics
// in one transaction. Only rubrics public before the step (CreatedStep <
// step) are eligible, which makes it idempotent with no extra record: a
// step has begun when a rubric carries LastActivation == step, or when no
// rubric was eligible, and nothing done during a step can change either.
// The trainer may call it again on every resume.
//
// Per group, two phases, so that slow LLM calls never run inside a write
// transaction and the pool's writes commit atomically with the group's
// advantages:
//
//	res, err := pool.Prepare(ctx, step, group, trajs) // read-only; all LLM calls
//	// fold res.Scores into the rewards: R = Reward + res.Lambda·Scores[i]
//	err = db.Update(func(tx *store.Tx) error {
//		r, _ := tx.Run(run)
//		if err := res.Apply(r); err != nil { // pool writes + events
//			return err
//		}
//		// ... PutAdvantage for each leaf, CloseGroup
//	})
//
// Prepare reads the stored pool and plans every change; Apply checks that
// the stored rubrics are still exactly what Prepare read (else ErrStale,
// nothing written) and replays the plan. Groups must go Prepare → Apply one
// at a time, so each Prepare sees the previous Apply. A crash (or a rolled
// back transaction) between Prepare and Apply loses nothing: prepare the
// group again and the same decisions come out, because every choice is a
// function of the Config (Seed included), the step, the group, its
// trajectories and the stored pool — A/B orders come from Swap(Seed, step,
// group, rubric, a, b), never from a random stream. A group that is closed
// or has advantage records is refused (ErrGroupDone), so its statistics
// are never counted twice.
//
// Within Prepare, in order: the active rubrics score the group and their
// usage is updated (pairs judged; the win rates' variance; the
// low-variance streak, counted per scored group and reset by a group the
// rubric separates; the running (win rate, outcome) Pearson sums; groups
// unlocked, credited to each rubric whose own win rates varied in a group
// whose base rewards were equal and whose shaped rewards are not), then
// RetireReason retires rubrics — a retired rubric stops scoring at once,
// even within its step; then induction from the anchors (groups of 3 or
// more whose outcomes vary: otherwise no draft could pass admission), then
// admission or support of each draft, then consolidation, which empties
// the candidate pool (unabsorbed drafts are retired as dropped).
//
// # Wiring it into the tree engine
//
// tree.Shaper is satisfied by a few lines outside both packages (neither
// imports the other):
//
//	type shaper struct {
//		pool    *rubricpool.Pool
//		outcome func(model.Group, tree.Leaf) float64 // e.g. F1Outcome(g, l.Turns), or l.Reward
//	}
//
//	func (s shaper) BeginStep(ctx context.Context, step uint64) error {
//		_, err := s.pool.BeginStep(ctx, step)
//		return err
//	}
//
//	func (s shaper) Prepare(ctx context.Context, step uint64, g model.Group, leaves []tree.Leaf) (*tree.Shaping, error) {
//		trajs := make([]rubricpool.Trajectory, len(leaves))
//		for i, l := range leaves {
//			trajs[i] = rubricpool.Trajectory{Node: l.Node.ID, Reward: l.Reward, Outcome: s.outcome(g, l), Turns: l.Turns}
//		}
//		res, err := s.pool.Prepare(ctx, step, g, trajs)
//		if err != nil {
//			return nil, err
//		}
//		return &tree.Shaping{Scores: res.Scores, Lambda: res.Lambda, Rubrics: res.Rubrics, Apply: res.Apply}, nil
//	}
//
// Commands that only read the pools use Load (inside a transaction) or
// Pool.Snapshot, and Rho for a rubric's running correlation.
package rubricpool
