package batch

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/batch/safetensors"
)

// FormatName is the file's "format" metadata: bumped if a tensor changes
// meaning. Format 1 trained a shared token only in its owner row (the
// Owner rule, which format 2 still writes on request) and had no
// coefficients or turn-level tensors.
const FormatName = "patrdb-batch/2"

// OwnershipRule is the file's "prefix_owner" metadata: which row owns a
// shared segment (seg_owner), the row that trains it under Mean and Owner.
const OwnershipRule = "a segment shared by several rows is owned by the row whose leaf has the smallest node id"

// CreditRule is the file's "credit_rule" metadata: the rule of the package
// documentation in one line ("" for an unknown rule).
func CreditRule(c Credit) string {
	switch c {
	case Repeat:
		return "every row trains all its action tokens with its leaf's advantage: a shared token is trained once per row that contains it"
	case Mean:
		return "a shared token is trained once, in its owner row, with the mean advantage of the rows that contain it; masked in the others"
	case Owner:
		return "a shared token is trained once, in its owner row, with that row's advantage; masked in the others"
	}
	return ""
}

type column struct {
	name string
	t    safetensors.Tensor
}

func col[T safetensors.Elem](name string, xs []T) safetensors.Tensor {
	return safetensors.Tensor{Name: name, DType: safetensors.DTypeOf[T](), Shape: []int{len(xs)}, Data: safetensors.Bytes(xs)}
}

// Tensors are the batch's arrays as the file holds them, per-token arrays
// first. Their data aliases the batch on a little-endian host.
func (b *Batch) Tensors() []safetensors.Tensor {
	ts := []safetensors.Tensor{
		col("input_ids", b.InputIDs), col("loss_mask", b.LossMask), col("old_logprobs", b.OldLogprobs),
		col("advantages", b.Advantages), col("positions", b.Positions),
		col("coef_pos", b.CoefPos), col("coef_neg", b.CoefNeg), col("loss_weight", b.LossWeight),
		col("policy_versions", b.PolicyVersions), col("turn_index", b.TurnIndex), col("turn_rewards", b.TurnRewards),
	}
	if b.Layout == Rows {
		ts = append(ts, col("row_offsets", b.RowOffsets))
	} else {
		ts = append(ts, col("seg_offsets", b.SegOffsets), col("seg_parent", b.SegParent), col("seg_group", b.SegGroup),
			col("seg_node", b.SegNode), col("seg_owner", b.SegOwner), col("row_segment", b.RowSegment))
	}
	return append(ts, col("row_leaf", b.RowLeaf), col("row_group", b.RowGroup), col("row_status", b.RowStatus),
		col("row_reward", b.RowReward), col("row_advantage", b.RowAdvantage),
		col("row_policy_min", b.RowPolicyMin), col("row_policy_max", b.RowPolicyMax), col("row_prompt_len", b.RowPromptLen))
}

// Metadata is the file's __metadata__: what the batch is and how it was
// cut, every value a string as the format requires.
func (b *Batch) Metadata() map[string]string {
	m := map[string]string{
		"format": FormatName, "run": b.Run, "step": strconv.FormatUint(b.Step, 10), "layout": string(b.Layout),
		"groups": joinIDs(b.Groups), "open_groups": joinIDs(b.OpenGroups),
		"rows": strconv.Itoa(b.Len()), "leaves": strconv.Itoa(b.Len()),
		"tokens_materialised":            strconv.FormatInt(b.TokensMaterialised, 10),
		"tokens_packed":                  strconv.FormatInt(b.TokensPacked, 10),
		"tree_token_ratio":               strconv.FormatFloat(b.TreeTokenRatio(), 'f', 4, 64),
		"action_tokens_without_logprobs": strconv.FormatInt(b.ActionTokensWithoutLogprobs, 10),
		"row_status":                     statusLegend,
		"prefix_owner":                   OwnershipRule,
		"credit":                         string(b.Credit),
		"credit_rule":                    CreditRule(b.Credit),
		"loss_norm":                      string(b.Norm),
		"loss_tokens":                    strconv.FormatInt(b.LossTokens, 10),
		"loss_rows":                      strconv.FormatInt(b.LossRows, 10),
		"turn_rewards_dropped":           strconv.FormatInt(b.TurnRewardsDropped, 10),
	}
	if lo, hi, ok := b.PolicyRange(); ok {
		m["policy_version_min"], m["policy_version_max"] = strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)
	}
	return m
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}

// Header is the file's first bytes (length and JSON header); with
// FileLen, what an HTTP server needs before it streams the tensors.
func (b *Batch) Header() ([]byte, error) { return safetensors.Header(b.Metadata(), b.Tensors()) }

// WriteTo writes the batch as a safetensors file.
func (b *Batch) WriteTo(w io.Writer) (int64, error) {
	return safetensors.Write(w, b.Metadata(), b.Tensors())
}

// FileLen is the size of the file WriteTo writes.
func (b *Batch) FileLen() (int64, error) {
	ts := b.Tensors()
	h, err := safetensors.Header(b.Metadata(), ts)
	if err != nil {
		return 0, err
	}
	return safetensors.Len(h, ts), nil
}

// Decode reads a batch file back. Its arrays are views of data where the
// host allows it (little-endian, data 8-byte aligned, as every Go
// allocation of a file's size is), copies otherwise: data must stay
// unchanged while the batch is in use. Viewing rather than copying halves
// what a client pays for a batch fetched over HTTP.
func Decode(data []byte) (*Batch, error) {
	f, err := safetensors.Read(data)
	if err != nil {
		return nil, errors.Join(ErrNotBatch, err)
	}
	md := f.Metadata
	if md["format"] != FormatName {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrNotBatch, md["format"], FormatName)
	}
	b := &Batch{Run: md["run"], Layout: Layout(md["layout"]), Credit: Credit(md["credit"]), Norm: Norm(md["loss_norm"])}
	if b.Step, err = strconv.ParseUint(md["step"], 10, 64); err != nil {
		return nil, fmt.Errorf("%w: step %q", ErrNotBatch, md["step"])
	}
	if b.Layout != Rows && b.Layout != Tree {
		return nil, fmt.Errorf("%w: layout %q", ErrNotBatch, b.Layout)
	}
	if (Options{Credit: b.Credit, Norm: b.Norm}).Validate() != nil || b.Credit == "" || b.Norm == "" {
		return nil, fmt.Errorf("%w: credit %q, loss_norm %q", ErrNotBatch, b.Credit, b.Norm)
	}
	for _, p := range []struct {
		key string
		dst *[]uint64
	}{{"groups", &b.Groups}, {"open_groups", &b.OpenGroups}} {
		if *p.dst, err = splitIDs(md[p.key]); err != nil {
			return nil, fmt.Errorf("%w: %s %q", ErrNotBatch, p.key, md[p.key])
		}
	}
	for _, p := range []struct {
		key string
		dst *int64
	}{{"tokens_materialised", &b.TokensMaterialised}, {"tokens_packed", &b.TokensPacked}, {"action_tokens_without_logprobs", &b.ActionTokensWithoutLogprobs},
		{"loss_tokens", &b.LossTokens}, {"loss_rows", &b.LossRows}, {"turn_rewards_dropped", &b.TurnRewardsDropped}} {
		if *p.dst, err = strconv.ParseInt(md[p.key], 10, 64); err != nil {
			return nil, fmt.Errorf("%w: %s %q", ErrNotBatch, p.key, md[p.key])
		}
	}
	// Every tensor Tensors names must be there with the dtype it gives.
	d := decoder{f: f}
	tmpl := (&Batch{Layout: b.Layout}).Tensors()
	get(&d, "input_ids", &b.InputIDs)
	get(&d, "loss_mask", &b.LossMask)
	get(&d, "old_logprobs", &b.OldLogprobs)
	get(&d, "advantages", &b.Advantages)
	get(&d, "positions", &b.Positions)
	get(&d, "coef_pos", &b.CoefPos)
	get(&d, "coef_neg", &b.CoefNeg)
	get(&d, "loss_weight", &b.LossWeight)
	get(&d, "policy_versions", &b.PolicyVersions)
	get(&d, "turn_index", &b.TurnIndex)
	get(&d, "turn_rewards", &b.TurnRewards)
	if b.Layout == Rows {
		get(&d, "row_offsets", &b.RowOffsets)
	} else {
		get(&d, "seg_offsets", &b.SegOffsets)
		get(&d, "seg_parent", &b.SegParent)
		get(&d, "seg_group", &b.SegGroup)
		get(&d, "seg_node", &b.SegNode)
		get(&d, "seg_owner", &b.SegOwner)
		get(&d, "row_segment", &b.RowSegment)
	}
	get(&d, "row_leaf", &b.RowLeaf)
	get(&d, "row_group", &b.RowGroup)
	get(&d, "row_status", &b.RowStatus)
	get(&d, "row_reward", &b.RowReward)
	get(&d, "row_advantage", &b.RowAdvantage)
	get(&d, "row_policy_min", &b.RowPolicyMin)
	get(&d, "row_policy_max", &b.RowPolicyMax)
	get(&d, "row_prompt_len", &b.RowPromptLen)
	if d.err == nil && len(d.f.Tensors) != len(tmpl) {
		d.err = fmt.Errorf("%w: %d tensors, want %d", ErrNotBatch, len(d.f.Tensors), len(tmpl))
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := b.checkShape(); err != nil {
		return nil, err
	}
	return b, nil
}

type decoder struct {
	f   *safetensors.File
	err error
}

func get[T safetensors.Elem](d *decoder, name string, dst *[]T) {
	if d.err != nil {
		return
	}
	t, ok := d.f.Tensors[name]
	if !ok || len(t.Shape) != 1 {
		d.err = fmt.Errorf("%w: no one-dimensional tensor %q", ErrNotBatch, name)
		return
	}
	v, ok, err := safetensors.View[T](t)
	if err == nil && !ok {
		v, err = safetensors.Values[T](t)
	}
	if err != nil {
		d.err = errors.Join(ErrNotBatch, err)
		return
	}
	*dst = v
}

func splitIDs(s string) ([]uint64, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	out := make([]uint64, len(parts))
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// checkShape checks the lengths and offsets a reader indexes with, so a
// decoded batch can be walked without going out of range.
func (b *Batch) checkShape() error {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrNotBatch, what) }
	n, nr := len(b.InputIDs), len(b.RowLeaf)
	for _, l := range []int{len(b.LossMask), len(b.OldLogprobs), len(b.Advantages), len(b.Positions), len(b.CoefPos),
		len(b.CoefNeg), len(b.LossWeight), len(b.PolicyVersions), len(b.TurnIndex), len(b.TurnRewards)} {
		if l != n {
			return bad("token arrays differ in length")
		}
	}
	for _, l := range []int{len(b.RowGroup), len(b.RowStatus), len(b.RowReward), len(b.RowAdvantage), len(b.RowPolicyMin), len(b.RowPolicyMax), len(b.RowPromptLen)} {
		if l != nr {
			return bad("row arrays differ in length")
		}
	}
	offsets := b.RowOffsets
	if b.Layout == Tree {
		offsets = b.SegOffsets
		ns := len(offsets) - 1
		if len(b.RowSegment) != nr || len(b.SegParent) != ns || len(b.SegGroup) != ns || len(b.SegNode) != ns || len(b.SegOwner) != ns {
			return bad("segment arrays differ in length")
		}
		for j, p := range b.SegParent {
			if p < -1 || p >= int64(j) || b.SegOwner[j] < 0 || b.SegOwner[j] >= int64(nr) {
				return bad(fmt.Sprintf("segment %d: parent %d or owner %d out of range", j, p, b.SegOwner[j]))
			}
		}
		for _, s := range b.RowSegment {
			if s < 0 || s >= int64(ns) {
				return bad("row segment out of range")
			}
		}
	} else if len(offsets) != nr+1 {
		return bad("row_offsets is not one longer than the rows")
	}
	if len(offsets) == 0 || offsets[0] != 0 || offsets[len(offsets)-1] != int64(n) {
		return bad("offsets do not span the tokens")
	}
	for i := 1; i < len(offsets); i++ {
		if offsets[i] < offsets[i-1] {
			return bad("offsets decrease")
		}
	}
	return nil
}
