// Package rubricpool implements ARBOR, the adaptive rubric buffer: one memory
// of natural-language process rubrics shared by every query of a training
// run, used to shape rewards where the outcome alone gives no signal (a group
// whose trajectories all get the same reward has zero GRPO advantage).
//
// A rubric's lifecycle, and the building block each stage uses:
//
//  1. Anchors. In a query group, tau+ is the trajectory with the highest
//     token-level F1 against the gold answer (TokenF1), tau-worst the lowest,
//     tau-hard the best of the rest (PickAnchors). An inducer contrasts
//     (tau+, tau-worst) and (tau+, tau-hard) and drafts a few rubrics.
//  2. Admission. A draft enters the candidate pool only if its scores over
//     the group separate it (Variance ≥ VarMin) and agree with the outcome
//     (Pearson with F1 ≥ RhoMin). A near-duplicate of an existing candidate
//     (NearDuplicate: word-3-shingle Jaccard of NormalizeRubric text ≥
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
// The functions here are pure and deterministic: the same inputs give the
// same anchors, pairs, A/B orders and scores, so a resumed or replayed run
// reproduces every decision. Persistent state (Corr sums, activation steps)
// is plain data the store records exactly.
package rubricpool
