package batch_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
)

// Validate names the first unusable field with ErrInvalidOptions, which
// is also model.ErrInvalid (a 400 over HTTP); the zero value and every
// known value pass, and so does a window of one version.
func TestOptionsValidate(t *testing.T) {
	for _, o := range []batch.Options{
		{},
		{Layout: batch.Rows, Credit: batch.Repeat, Norm: batch.TokenMean},
		{Layout: batch.Tree, Credit: batch.Mean, Norm: batch.SeqMeanTokenMean},
		{Credit: batch.Owner},
		{MinPolicyVersion: 4, MaxPolicyVersion: 4},
		{MinPolicyVersion: 4}, // no upper bound
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, o := range []batch.Options{
		{Layout: "packed"}, {Credit: "sum"}, {Norm: "token"},
		{MinPolicyVersion: 5, MaxPolicyVersion: 4},
	} {
		err := o.Validate()
		if !errors.Is(err, batch.ErrInvalidOptions) || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalidOptions and model.ErrInvalid", o, err)
		}
	}
}

// The options a batch records: the empty fields at their defaults, the
// set ones kept.
func TestOptionsWithDefaults(t *testing.T) {
	got := batch.Options{Groups: []uint64{2}}.WithDefaults()
	if got.Layout != batch.Rows || got.Credit != batch.Repeat || got.Norm != batch.TokenMean || len(got.Groups) != 1 {
		t.Errorf("defaults: %+v", got)
	}
	set := batch.Options{Layout: batch.Tree, Credit: batch.Owner, Norm: batch.SeqMeanTokenMean}
	if got := set.WithDefaults(); got.Layout != set.Layout || got.Credit != set.Credit || got.Norm != set.Norm {
		t.Errorf("%+v with defaults: %+v", set, got)
	}
}

// Which leaves become rows: completed always, pruned and truncated unless
// excluded, failed only on request, nodes that are no leaf never.
func TestOptionsIncludes(t *testing.T) {
	all := []model.NodeStatus{model.NodeCompleted, model.NodePruned, model.NodeTruncated, model.NodeFailed, model.NodeExpanded}
	for _, c := range []struct {
		o    batch.Options
		want []bool
	}{
		{batch.Options{}, []bool{true, true, true, false, false}},
		{batch.Options{ExcludePruned: true}, []bool{true, false, true, false, false}},
		{batch.Options{ExcludeTruncated: true}, []bool{true, true, false, false, false}},
		{batch.Options{IncludeFailed: true}, []bool{true, true, true, true, false}},
	} {
		for i, s := range all {
			if got := c.o.Includes(s); got != c.want[i] {
				t.Errorf("%+v includes %s: %v, want %v", c.o, s, got, c.want[i])
			}
		}
	}
}

// The row_status codes the file's legend names.
func TestStatusCode(t *testing.T) {
	for s, want := range map[model.NodeStatus]uint8{
		model.NodeCompleted: 0, model.NodePruned: 1, model.NodeTruncated: 2, model.NodeFailed: 3,
	} {
		if got := batch.StatusCode(s); got != want {
			t.Errorf("StatusCode(%s) = %d, want %d", s, got, want)
		}
	}
}

// The tree-token ratio and the policy range are the batch's figures: 0 and
// none for an empty batch.
func TestBatchFigures(t *testing.T) {
	b := forkTree(batch.Repeat, batch.TokenMean)
	if got, want := b.TreeTokenRatio(), 11.0/7; got != want {
		t.Errorf("TreeTokenRatio = %v, want %v", got, want)
	}
	b.RowPolicyMin, b.RowPolicyMax = []int64{3, 1, 2}, []int64{4, 6, 5}
	if lo, hi, ok := b.PolicyRange(); lo != 1 || hi != 6 || !ok {
		t.Errorf("PolicyRange = %d, %d, %v; want 1, 6, true", lo, hi, ok)
	}
	b.RowPolicyMin, b.RowPolicyMax = []int64{2, 3}, []int64{7, 3}
	if lo, hi, ok := b.PolicyRange(); lo != 2 || hi != 7 || !ok {
		t.Errorf("PolicyRange = %d, %d, %v; want 2, 7, true", lo, hi, ok)
	}
	var empty batch.Batch
	if _, _, ok := empty.PolicyRange(); ok || empty.TreeTokenRatio() != 0 || empty.Len() != 0 {
		t.Errorf("an empty batch: PolicyRange ok %v, ratio %v, len %d", ok, empty.TreeTokenRatio(), empty.Len())
	}
}
