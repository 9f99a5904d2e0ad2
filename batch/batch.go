package batch

import (
	"fmt"

	"github.com/patrdb/patrdb/store"
)

// Layout is the shape of a batch: Rows or Tree.
type Layout string

const (
	Rows Layout = "rows"
	Tree Layout = "tree"
)

// Options choose the rows of a batch and its layout. The zero value is
// the rows layout of every GRPO leaf of every closed group of the step.
type Options struct {
	Layout Layout   // Rows when empty
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
	case o.MaxPolicyVersion != 0 && o.MaxPolicyVersion < o.MinPolicyVersion:
		return invalid("policy-version window [%d, %d] is empty", o.MinPolicyVersion, o.MaxPolicyVersion)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w (%w): %s", ErrInvalidOptions, store.ErrInvalid, fmt.Sprintf(format, args...))
}

func (o Options) layout() Layout {
	if o.Layout == "" {
		return Rows
	}
	return o.Layout
}

// includes reports whether a node in status s becomes a row.
func (o Options) includes(s store.NodeStatus) bool {
	switch s {
	case store.NodeCompleted:
		return true
	case store.NodePruned:
		return !o.ExcludePruned
	case store.NodeTruncated:
		return !o.ExcludeTruncated
	case store.NodeFailed:
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

var statusCodes = map[store.NodeStatus]uint8{
	store.NodeCompleted: StatusCompleted, store.NodePruned: StatusPruned,
	store.NodeTruncated: StatusTruncated, store.NodeFailed: StatusFailed,
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
	Groups     []uint64 // closed groups read, in id order
	OpenGroups []uint64 // groups of the step still open, not read

	InputIDs    []int32
	LossMask    []uint8
	OldLogprobs []float32
	Advantages  []float32
	Positions   []int32

	RowOffsets   []int64 // Rows: row i is tokens [RowOffsets[i], RowOffsets[i+1])
	RowSegment   []int64 // Tree: the last segment of row i's sequence
	RowLeaf      []int64 // the leaf's node id
	RowGroup     []int64
	RowStatus    []uint8 // StatusCompleted, ...
	RowReward    []float64
	RowAdvantage []float64 // the leaf's GRPO advantage; 0 for failed rows
	RowPolicyMin []int64   // oldest and newest policy version on the row's path
	RowPolicyMax []int64

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
