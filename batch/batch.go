package batch

import (
	"fmt"

	"github.com/patrdb/patrdb/model"
)

// Layout is the shape of a batch: Rows or Tree.
type Layout string

const (
	Rows Layout = "rows"
	Tree Layout = "tree"
)

// Credit is the rule that says which rows train a token several rows
// share, and with which advantage (see the package documentation).
type Credit string

const (
	// Repeat: every row trains its whole path with its leaf's advantage,
	// so a shared token counts once per row that contains it — GRPO over
	// the leaves' full trajectories, the PaTR objective.
	Repeat Credit = "repeat"
	// Mean: a shared token is trained once, in its owner row, with the
	// mean of the advantages of the rows that contain it.
	Mean Credit = "mean"
	// Owner: a shared token is trained once, in its owner row, with that
	// row's advantage (the rule of format 1 files).
	Owner Credit = "owner"
)

// Norm is how the loss coefficients normalise the summed token losses,
// named as verl's loss_agg_mode names them.
type Norm string

const (
	// TokenMean divides by the trained tokens of all rows together.
	TokenMean Norm = "token-mean"
	// SeqMeanTokenMean averages each row over its own trained tokens,
	// then over the rows that train any token.
	SeqMeanTokenMean Norm = "seq-mean-token-mean"
)

// Options choose the rows of a batch, its layout and its credit rule. The
// zero value is the rows layout of every GRPO leaf of every closed group
// of the step, credited Repeat, normalised TokenMean.
type Options struct {
	Layout Layout   // Rows when empty
	Credit Credit   // Repeat when empty
	Norm   Norm     // TokenMean when empty
	Groups []uint64 // only these groups of the step; nil: all of them

	ExcludePruned    bool // leave out leaves pruned by routing (kept as negatives otherwise)
	ExcludeTruncated bool // leave out leaves cut at the turn cap
	IncludeFailed    bool // add failed nodes as rows with advantage 0

	// A row is dropped when any turn on its path was sampled by a policy
	// version below MinPolicyVersion or above MaxPolicyVersion (0: no upper
	// bound). Turns written without a version count as version 0.
	MinPolicyVersion uint64
	MaxPolicyVersion uint64
}

// Validate reports the first unusable field.
func (o Options) Validate() error {
	switch {
	case o.Layout != "" && o.Layout != Rows && o.Layout != Tree:
		return invalid("layout %q: want rows or tree", o.Layout)
	case o.Credit != "" && o.Credit != Repeat && o.Credit != Mean && o.Credit != Owner:
		return invalid("credit %q: want repeat, mean or owner", o.Credit)
	case o.Norm != "" && o.Norm != TokenMean && o.Norm != SeqMeanTokenMean:
		return invalid("norm %q: want token-mean or seq-mean-token-mean", o.Norm)
	case o.MaxPolicyVersion != 0 && o.MaxPolicyVersion < o.MinPolicyVersion:
		return invalid("policy-version window [%d, %d] is empty", o.MinPolicyVersion, o.MaxPolicyVersion)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", ErrInvalidOptions, model.ErrInvalid, fmt.Sprintf(format, args...))
}

// WithDefaults is o with its empty layout, credit rule and normalisation
// set to their defaults (Rows, Repeat, TokenMean): the options a batch
// read with o records.
func (o Options) WithDefaults() Options {
	if o.Layout == "" {
		o.Layout = Rows
	}
	if o.Credit == "" {
		o.Credit = Repeat
	}
	if o.Norm == "" {
		o.Norm = TokenMean
	}
	return o
}

// Includes reports whether a leaf in status s becomes a row.
func (o Options) Includes(s model.NodeStatus) bool {
	switch s {
	case model.NodeCompleted:
		return true
	case model.NodePruned:
		return !o.ExcludePruned
	case model.NodeTruncated:
		return !o.ExcludeTruncated
	case model.NodeFailed:
		return o.IncludeFailed
	}
	return false
}

// Row statuses as RowStatus holds them (and the file's row_status tensor).
const (
	StatusCompleted uint8 = iota
	StatusPruned
	StatusTruncated
	StatusFailed
)

// StatusCode is the RowStatus code of a leaf in status s.
func StatusCode(s model.NodeStatus) uint8 { return statusCodes[s] }

var statusCodes = map[model.NodeStatus]uint8{
	model.NodeCompleted: StatusCompleted, model.NodePruned: StatusPruned,
	model.NodeTruncated: StatusTruncated, model.NodeFailed: StatusFailed,
}

// statusLegend is how the file's metadata names the codes.
const statusLegend = "0=completed,1=pruned,2=truncated,3=failed"

// Batch is one step's training batch. Token arrays have one element per
// token: every row's tokens back to back (Rows), or every token once
// (Tree). Row arrays have one element per row; segment arrays, one per
// segment (Tree only).
type Batch struct {
	Run        string
	Step       uint64
	Layout     Layout
	Credit     Credit
	Norm       Norm
	Groups     []uint64 // closed groups read, in id order
	OpenGroups []uint64 // groups of the step still open, not read

	InputIDs    []int32
	LossMask    []uint8 // 1 where a row trains the token (Tree: any row)
	OldLogprobs []float32
	Advantages  []float32 // the credit rule's advantage (Tree: see the package documentation)
	Positions   []int32
	// The clipped loss's coefficients and the weight of any other
	// per-token term (package documentation, "The loss"): 0 where
	// LossMask is 0.
	CoefPos    []float32
	CoefNeg    []float32
	LossWeight []float32
	// Per token, whatever the credit: the policy version that sampled its
	// turn (0 on prompt tokens), its turn's index on the path (-1 on
	// prompt tokens), and each turn's reward on its last action token.
	PolicyVersions []int64
	TurnIndex      []int32
	TurnRewards    []float32

	RowOffsets   []int64 // Rows: row i is tokens [RowOffsets[i], RowOffsets[i+1])
	RowSegment   []int64 // Tree: the last segment of row i's sequence
	RowLeaf      []int64 // the leaf's node id
	RowGroup     []int64
	RowStatus    []uint8 // StatusCompleted, ...
	RowReward    []float64
	RowAdvantage []float64 // the leaf's GRPO advantage; 0 for failed rows
	RowPolicyMin []int64   // oldest and newest policy version on the row's path
	RowPolicyMax []int64
	RowPromptLen []int64 // the prompt tokens that start the row

	SegOffsets []int64 // Tree: segment j is tokens [SegOffsets[j], SegOffsets[j+1])
	SegParent  []int64 // -1 for a group's prompt segment
	SegGroup   []int64
	SegNode    []int64 // 0 for a prompt segment
	SegOwner   []int64 // the row whose loss the segment's action tokens enter

	// Tokens in all rows (shared prefixes counted per row) and tokens
	// packed in the tree (each once), for both layouts;
	// TreeTokenRatio = TokensMaterialised / TokensPacked.
	TokensMaterialised int64
	TokensPacked       int64
	// ActionTokensWithoutLogprobs counts trainable tokens whose turn was
	// written without logprobs (their old_logprobs are 0).
	ActionTokensWithoutLogprobs int64
	// LossTokens and LossRows are the normalisers the coefficients were
	// divided by: the trained tokens of the rows layout (LossMask's sum
	// there) and the rows that train at least one.
	LossTokens int64
	LossRows   int64
	// TurnRewardsDropped counts turns (each once) with a nonzero reward
	// and no action token to carry it.
	TurnRewardsDropped int64
}

// Len is the number of rows.
func (b *Batch) Len() int { return len(b.RowLeaf) }

// TreeTokenRatio is tokens materialised in rows ÷ tokens packed in the
// tree: how many times a per-row batch repeats each token. 0 when empty.
func (b *Batch) TreeTokenRatio() float64 {
	if b.TokensPacked == 0 {
		return 0
	}
	return float64(b.TokensMaterialised) / float64(b.TokensPacked)
}

// PolicyRange is the oldest and newest policy version over the rows; ok is
// false when there are none.
func (b *Batch) PolicyRange() (lo, hi int64, ok bool) {
	for i := range b.RowPolicyMin {
		if !ok || b.RowPolicyMin[i] < lo {
			lo = b.RowPolicyMin[i]
		}
		if !ok || b.RowPolicyMax[i] > hi {
			hi = b.RowPolicyMax[i]
		}
		ok = true
	}
	return lo, hi, ok
}
