package batch_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/safetensors"
)

func fileOf(t *testing.T, b *batch.Batch) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo said %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// A file decodes to the batch that wrote it, in both layouts and under
// every credit rule; FileLen and Header say what WriteTo writes, before
// it writes it (what an HTTP server sends first).
func TestFileRoundTrip(t *testing.T) {
	// Figures and ids past 10 (written in base 10, read in base 10), and
	// empty batches (a step with no closed group) in both layouts.
	big := forkTree(batch.Mean, batch.TokenMean)
	big.Groups, big.OpenGroups = []uint64{12, 1 << 40}, []uint64{99}
	big.TokensMaterialised, big.TokensPacked, big.ActionTokensWithoutLogprobs = 1<<33+11, 1<<32+13, 17
	big.LossTokens, big.LossRows, big.TurnRewardsDropped = 1<<31+19, 23, 29
	big.Step = 1<<63 + 11
	emptyTree := &batch.Batch{Run: "r", Layout: batch.Tree, Credit: batch.Repeat, Norm: batch.TokenMean, SegOffsets: []int64{0}}
	emptyRows := &batch.Batch{Run: "r", Layout: batch.Rows, Credit: batch.Owner, Norm: batch.TokenMean, RowOffsets: []int64{0}}
	for _, b := range []*batch.Batch{big, big.Expand(), emptyTree, emptyRows} {
		back, err := batch.Decode(fileOf(t, b))
		if err != nil {
			t.Fatalf("%s: %v", b.Layout, err)
		}
		if !reflect.DeepEqual(zeroNil(back), zeroNil(b)) {
			t.Errorf("%s: decoded %+v, want %+v", b.Layout, back, b)
		}
	}
	for _, credit := range credits {
		for _, b := range []*batch.Batch{forkTree(credit, batch.SeqMeanTokenMean), forkRows(credit, batch.TokenMean)} {
			raw := fileOf(t, b)
			back, err := batch.Decode(raw)
			if err != nil {
				t.Fatalf("%s %s: %v", b.Layout, credit, err)
			}
			if !reflect.DeepEqual(back, b) {
				t.Errorf("%s %s: decoded %+v, want %+v", b.Layout, credit, back, b)
			}
			if n, err := b.FileLen(); err != nil || n != int64(len(raw)) {
				t.Errorf("%s: FileLen %d, %v; the file is %d bytes", b.Layout, n, err, len(raw))
			}
			if h, err := b.Header(); err != nil || !bytes.HasPrefix(raw, h) || len(h) < 8 {
				t.Errorf("%s: Header (%d bytes, %v) does not start the file", b.Layout, len(h), err)
			}
		}
	}
}

// zeroNil is b with its empty arrays nil: a file does not tell an empty
// array from none.
func zeroNil(b *batch.Batch) *batch.Batch {
	c := *b
	v := reflect.ValueOf(&c).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Len() == 0 {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return &c
}

// The metadata says what the batch is, in strings: its figures, its rule
// in words, the policy versions it spans (none for an empty batch).
func TestFileMetadata(t *testing.T) {
	md := forkTree(batch.Mean, batch.SeqMeanTokenMean).Metadata()
	for k, want := range map[string]string{
		"format": "patrdb-batch/2", "run": "r", "step": "12", "layout": "tree", "groups": "7", "open_groups": "9",
		"rows": "2", "leaves": "2", "tokens_materialised": "11", "tokens_packed": "7", "tree_token_ratio": "1.5714",
		"action_tokens_without_logprobs": "1", "credit": "mean", "credit_rule": batch.CreditRule(batch.Mean),
		"loss_norm": "seq-mean-token-mean", "loss_tokens": "4", "loss_rows": "2", "turn_rewards_dropped": "2",
		"policy_version_min": "1", "policy_version_max": "2",
		"row_status": "0=completed,1=pruned,2=truncated,3=failed", "prefix_owner": batch.OwnershipRule,
	} {
		if md[k] != want {
			t.Errorf("metadata %s = %q, want %q", k, md[k], want)
		}
	}
	if md := (&batch.Batch{Groups: []uint64{3, 12}}).Metadata(); md["groups"] != "3,12" || md["open_groups"] != "" {
		t.Errorf("groups %q, open_groups %q", md["groups"], md["open_groups"])
	}
	late := &batch.Batch{RowPolicyMin: []int64{11}, RowPolicyMax: []int64{12}}
	if md := late.Metadata(); md["policy_version_min"] != "11" || md["policy_version_max"] != "12" {
		t.Errorf("policy versions %q..%q, want 11..12", md["policy_version_min"], md["policy_version_max"])
	}
	if _, ok := (&batch.Batch{}).Metadata()["policy_version_min"]; ok {
		t.Errorf("an empty batch names a policy version")
	}
	seen := map[string]bool{}
	for _, c := range credits {
		r := batch.CreditRule(c)
		if r == "" || seen[r] {
			t.Errorf("credit %s: rule %q (empty or another rule's)", c, r)
		}
		seen[r] = true
	}
	if batch.CreditRule("sum") != "" {
		t.Errorf("an unknown credit has a rule")
	}
}

// A file whose metadata is not a batch's — another format, an unknown
// layout, credit or norm, a figure that is no number — is ErrNotBatch.
func TestDecodeRefusesMetadata(t *testing.T) {
	b := forkTree(batch.Repeat, batch.TokenMean)
	for key, v := range map[string]string{
		"format": "patrdb-batch/1", "step": "x", "layout": "packed", "credit": "sum", "loss_norm": "token",
		"groups": "7,x", "open_groups": "-1", "tokens_materialised": "", "tokens_packed": "x",
		"action_tokens_without_logprobs": "1.5", "loss_tokens": "x", "loss_rows": "x", "turn_rewards_dropped": "x",
	} {
		for _, drop := range []bool{false, true} {
			md := b.Metadata()
			md[key] = v
			if drop {
				if key == "groups" || key == "open_groups" {
					continue // absent: no groups
				}
				delete(md, key)
			}
			var buf bytes.Buffer
			if _, err := safetensors.Write(&buf, md, b.Tensors()); err != nil {
				t.Fatal(err)
			}
			if _, err := batch.Decode(buf.Bytes()); !errors.Is(err, batch.ErrNotBatch) || !strings.Contains(err.Error(), key) {
				t.Errorf("%s=%q (dropped %v): %v, want ErrNotBatch naming %s", key, v, drop, err, key)
			}
		}
	}
	// The credit and norm must be named, not left to the defaults.
	for _, key := range []string{"credit", "loss_norm"} {
		md := b.Metadata()
		md[key] = ""
		var buf bytes.Buffer
		if _, err := safetensors.Write(&buf, md, b.Tensors()); err != nil {
			t.Fatal(err)
		}
		if _, err := batch.Decode(buf.Bytes()); !errors.Is(err, batch.ErrNotBatch) {
			t.Errorf("%s empty: %v, want ErrNotBatch", key, err)
		}
	}
}

// Every tensor the layout names must be there, one-dimensional, with its
// dtype, and no other: a file missing one, or with one more (a rows
// tensor in a tree file), is ErrNotBatch.
func TestDecodeRefusesTensors(t *testing.T) {
	for _, b := range []*batch.Batch{forkTree(batch.Repeat, batch.TokenMean), forkRows(batch.Repeat, batch.TokenMean)} {
		ts := b.Tensors()
		for i := range ts {
			edits := map[string][]safetensors.Tensor{
				"missing": append(append([]safetensors.Tensor(nil), ts[:i]...), ts[i+1:]...),
				"2-D":     slicesWith(ts, i, func(x *safetensors.Tensor) { x.Shape = []int{1, x.Shape[0]} }),
			}
			if ts[i].DType != safetensors.I64 {
				edits["retyped"] = slicesWith(ts, i, func(x *safetensors.Tensor) {
					x.DType, x.Data = safetensors.I64, safetensors.Bytes(make([]int64, x.Shape[0]))
				})
			} else {
				edits["retyped"] = slicesWith(ts, i, func(x *safetensors.Tensor) {
					x.DType, x.Data = safetensors.I32, safetensors.Bytes(make([]int32, x.Shape[0]))
				})
			}
			for what, edited := range edits {
				var buf bytes.Buffer
				if _, err := safetensors.Write(&buf, b.Metadata(), edited); err != nil {
					t.Fatal(err)
				}
				_, err := batch.Decode(buf.Bytes())
				if !errors.Is(err, batch.ErrNotBatch) || !strings.Contains(err.Error(), fmt.Sprintf("%q", ts[i].Name)) {
					t.Errorf("%s: %s %s: %v, want ErrNotBatch naming the tensor", b.Layout, ts[i].Name, what, err)
				}
			}
		}
		extra := append(append([]safetensors.Tensor(nil), ts...), safetensors.Tensor{
			Name: "row_offsets_2", DType: safetensors.I64, Shape: []int{1}, Data: safetensors.Bytes([]int64{0})})
		var buf bytes.Buffer
		if _, err := safetensors.Write(&buf, b.Metadata(), extra); err != nil {
			t.Fatal(err)
		}
		if _, err := batch.Decode(buf.Bytes()); !errors.Is(err, batch.ErrNotBatch) {
			t.Errorf("%s: a tensor more: %v, want ErrNotBatch", b.Layout, err)
		}
	}
}

func slicesWith(ts []safetensors.Tensor, i int, edit func(*safetensors.Tensor)) []safetensors.Tensor {
	out := append([]safetensors.Tensor(nil), ts...)
	t := out[i]
	t.Shape = append([]int(nil), t.Shape...)
	edit(&t)
	out[i] = t
	return out
}

// A decoded batch can be walked without going out of range: arrays whose
// lengths disagree, parents, owners and row segments out of range, and
// offsets that do not span the tokens in order are ErrNotBatch. The
// edges that are in range (a segment's parent just before it, the last
// row as owner, the last segment as a row's end) are read.
func TestDecodeRefusesShapes(t *testing.T) {
	for name, edit := range map[string]func(b *batch.Batch){
		"token arrays":       func(b *batch.Batch) { b.LossWeight = b.LossWeight[1:] },
		"positions":          func(b *batch.Batch) { b.Positions = append(b.Positions, 0) },
		"row arrays":         func(b *batch.Batch) { b.RowPromptLen = b.RowPromptLen[1:] },
		"row statuses":       func(b *batch.Batch) { b.RowStatus = append(b.RowStatus, 0) },
		"seg_parent":         func(b *batch.Batch) { b.SegParent = b.SegParent[1:] },
		"seg_group":          func(b *batch.Batch) { b.SegGroup = b.SegGroup[1:] },
		"seg_node":           func(b *batch.Batch) { b.SegNode = b.SegNode[1:] },
		"seg_owner":          func(b *batch.Batch) { b.SegOwner = b.SegOwner[1:] },
		"row segments":       func(b *batch.Batch) { b.RowSegment = b.RowSegment[1:] },
		"a later parent":     func(b *batch.Batch) { b.SegParent[2] = 2 },
		"a parent below -1":  func(b *batch.Batch) { b.SegParent[1] = -2 },
		"an owner past rows": func(b *batch.Batch) { b.SegOwner[3] = 2 },
		"a negative owner":   func(b *batch.Batch) { b.SegOwner[0] = -1 },
		"a row segment past": func(b *batch.Batch) { b.RowSegment[1] = 4 },
		"a negative row seg": func(b *batch.Batch) { b.RowSegment[0] = -1 },
		"no offsets": func(b *batch.Batch) {
			b.SegOffsets, b.SegParent, b.SegGroup, b.SegNode, b.SegOwner = nil, nil, nil, nil, nil
		},
		"offsets from 1":       func(b *batch.Batch) { b.SegOffsets[0] = 1 },
		"offsets short":        func(b *batch.Batch) { b.SegOffsets[4] = 6 },
		"offsets decreasing":   func(b *batch.Batch) { b.SegOffsets[2] = 1 },
		"rows: offsets":        func(b *batch.Batch) { *b = *b.Expand(); b.RowOffsets = b.RowOffsets[:2] },
		"rows: offsets down":   func(b *batch.Batch) { *b = *b.Expand(); b.RowOffsets[1] = 12 },
		"rows: offsets span":   func(b *batch.Batch) { *b = *b.Expand(); b.RowOffsets[2] = 10 },
		"rows: offsets from 1": func(b *batch.Batch) { *b = *b.Expand(); b.RowOffsets[0] = 1 },
		"rows: a negative end": func(b *batch.Batch) { *b = *b.Expand(); b.RowOffsets[1] = -1 },
		"rows: an offset more": func(b *batch.Batch) { *b = *b.Expand(); b.RowOffsets = []int64{0, 5, 5, 11} },
	} {
		b := forkTree(batch.Owner, batch.TokenMean)
		edit(b)
		if _, err := batch.Decode(fileOf(t, b)); !errors.Is(err, batch.ErrNotBatch) {
			t.Errorf("%s: %v, want ErrNotBatch", name, err)
		}
	}
	// In range at every edge: a first segment without a parent, each
	// segment's parent the one just before it, the last row owning them
	// all, rows ending at the first and the last segment; and rows of no
	// token.
	b := forkTree(batch.Owner, batch.TokenMean)
	b.SegParent, b.SegOwner, b.RowSegment = []int64{-1, 0, 1, 2}, []int64{1, 1, 1, 1}, []int64{0, 3}
	if _, err := batch.Decode(fileOf(t, b)); err != nil {
		t.Errorf("edges in range: %v", err)
	}
	r := forkRows(batch.Owner, batch.TokenMean)
	r.RowOffsets[1] = 0
	if _, err := batch.Decode(fileOf(t, r)); err != nil {
		t.Errorf("a row of no token: %v", err)
	}
	r.RowOffsets[1] = 11
	if _, err := batch.Decode(fileOf(t, r)); err != nil {
		t.Errorf("a last row of no token: %v", err)
	}
}

// A file that is no safetensors file is ErrNotBatch and the framing's
// own safetensors.ErrFormat.
func TestDecodeRefusesFraming(t *testing.T) {
	raw := fileOf(t, forkRows(batch.Repeat, batch.TokenMean))
	for i, bad := range [][]byte{nil, raw[:7], raw[:len(raw)-1]} {
		if _, err := batch.Decode(bad); !errors.Is(err, batch.ErrNotBatch) || !errors.Is(err, safetensors.ErrFormat) {
			t.Errorf("damaged file %d: %v", i, err)
		}
	}
}
