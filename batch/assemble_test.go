package batch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/internal/batchtest"
	"github.com/patrdb/patrdb/batch/internal/split"
	"github.com/patrdb/patrdb/batch/sourcewire"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/safetensors"
	"github.com/patrdb/patrdb/internal/frozenlake"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

var llm = batchtest.LLMSpec{Steps: 2, Groups: 3, Roots: 3, Depth: 3, MaxTurns: 4, Tokens: 300, Seed: 5}

// optionSets are the cuts every equality test checks.
var optionSets = []batch.Options{
	{},
	{ExcludePruned: true, ExcludeTruncated: true},
	{IncludeFailed: true},
	{MinPolicyVersion: 2, MaxPolicyVersion: 5},
	{Groups: []uint64{2}},
}

func fileBytes(tb testing.TB, b *batch.Batch) []byte {
	tb.Helper()
	var buf bytes.Buffer
	n, err := b.WriteTo(&buf)
	if err != nil {
		tb.Fatal(err)
	}
	if want, err := b.FileLen(); err != nil || want != n || int64(buf.Len()) != n {
		tb.Fatalf("FileLen %d (%v), wrote %d", want, err, n)
	}
	return buf.Bytes()
}

// sameBatch compares two batches through their files, which hold every
// array and figure; on a difference it names the first tensor that differs.
func sameBatch(tb testing.TB, what string, got, want *batch.Batch) {
	tb.Helper()
	g, w := fileBytes(tb, got), fileBytes(tb, want)
	if bytes.Equal(g, w) {
		return
	}
	gf, _ := safetensors.Read(g)
	wf, _ := safetensors.Read(w)
	for _, name := range wf.Names {
		if !bytes.Equal(gf.Tensors[name].Data, wf.Tensors[name].Data) {
			tb.Fatalf("%s: tensor %s differs (%d vs %d bytes)", what, name, len(gf.Tensors[name].Data), len(wf.Tensors[name].Data))
		}
	}
	tb.Fatalf("%s: metadata differs:\n got %v\nwant %v", what, gf.Metadata, wf.Metadata)
}

// creditNorms are every credit rule with every normalisation.
var creditNorms = func() (out []batch.Options) {
	for _, c := range []batch.Credit{batch.Repeat, batch.Mean, batch.Owner} {
		for _, n := range []batch.Norm{batch.TokenMean, batch.SeqMeanTokenMean} {
			out = append(out, batch.Options{Credit: c, Norm: n})
		}
	}
	return out
}()

// checkStep proves, for every option set under every credit rule and
// normalisation, that each row equals the trainer's own rebuild from
// Trajectory, and that the tree layout expands back to exactly the rows.
func checkStep(t *testing.T, db *store.DB, run string, step uint64) {
	t.Helper()
	var all []batch.Options
	for _, opts := range optionSets {
		for _, c := range creditNorms {
			opts.Credit, opts.Norm = c.Credit, c.Norm
			all = append(all, opts)
		}
	}
	for _, opts := range all {
		name := fmt.Sprintf("step %d %+v", step, opts)
		err := db.ViewRun(run, func(r *store.RunTx) error {
			if opts.Groups != nil {
				if _, err := r.GroupAt(step, opts.Groups[0]); err != nil {
					return nil // not a group of this step
				}
			}
			rows, err := batchdb.Read(r, step, opts)
			if err != nil {
				return err
			}
			sameBatch(t, name+" rows vs trajectories", rows, reference(t, r, step, opts))
			opts.Layout = batch.Tree
			tree, err := batchdb.Read(r, step, opts)
			if err != nil {
				return err
			}
			if int64(len(tree.InputIDs)) != rows.TokensPacked || tree.TokensMaterialised != int64(len(rows.InputIDs)) {
				t.Errorf("%s: tree holds %d tokens, rows %d; packed %d", name, len(tree.InputIDs), len(rows.InputIDs), rows.TokensPacked)
			}
			sameBatch(t, name+" tree expanded vs rows", tree.Expand(), rows)
			sameFile(t, name+" tree over the wire", overTheWire(t, r, step, opts), tree)
			opts.Layout = batch.Rows
			sameFile(t, name+" rows over the wire", overTheWire(t, r, step, opts), rows)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// overTheWire is the batch a client builds from the step's source sent
// through package sourcewire, into a reused batch: one read fresh with
// another credit rule and at least as long, so that a value left over
// from it shows.
func overTheWire(t *testing.T, r *store.RunTx, step uint64, opts batch.Options) *batch.Batch {
	t.Helper()
	src, err := batchdb.ReadSource(r, step, opts.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	body := sourcewire.Append(nil, src)
	reused, err := batchdb.Read(r, step, batch.Options{Credit: batch.Mean, Norm: batch.SeqMeanTokenMean, IncludeFailed: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Assemble(reused, opts, func(batch.Options) (*batch.Source, error) { return sourcewire.Decode(body) }); err != nil {
		t.Fatal(err)
	}
	return reused
}

// sameFile fails unless got and want write the same file, byte for byte.
func sameFile(t *testing.T, name string, got, want *batch.Batch) {
	t.Helper()
	var g, w bytes.Buffer
	if _, err := got.WriteTo(&g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := want.WriteTo(&w); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !bytes.Equal(g.Bytes(), w.Bytes()) {
		t.Errorf("%s: files of %d and %d bytes differ", name, g.Len(), w.Len())
	}
}

func TestLLMShapedRowsAndTree(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	for step := uint64(1); step <= uint64(llm.Steps); step++ {
		checkStep(t, db, "llm", step)
	}
	// The same, with every batch written by several goroutines.
	restore := split.Lower(1)
	checkStep(t, db, "llm", 1)
	restore()
	b, err := batchdb.ReadDB(db, "llm", 1, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() < 10 || b.TreeTokenRatio() <= 1.2 || b.ActionTokensWithoutLogprobs == 0 {
		t.Errorf("fixture too tame to prove anything: %d rows, tree ratio %.2f, %d tokens without logprobs", b.Len(), b.TreeTokenRatio(), b.ActionTokensWithoutLogprobs)
	}
	last, err := batchdb.ReadDB(db, "llm", uint64(llm.Steps), batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(last.OpenGroups) != 1 || len(last.Groups) != llm.Groups-1 {
		t.Errorf("last step: groups %v, open %v", last.Groups, last.OpenGroups)
	}
}

func TestDemoRowsAndTree(t *testing.T) {
	db := storetest.Open(t)
	cfg := frozenlake.DefaultTrainConfig("patr")
	cfg.Steps, cfg.Batch, cfg.EvalEpisodes = 2, 4, 10
	tr, err := frozenlake.NewTrainer(db, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	checkStep(t, db, cfg.Run, 1)
	checkStep(t, db, cfg.Run, 2)
}

// A stored step's file reads back to the same batch, and the same
// batch always writes the same bytes.
func TestStoredStepsFileRoundTrip(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	for _, layout := range []batch.Layout{batch.Rows, batch.Tree} {
		b, err := batchdb.ReadDB(db, "llm", 1, batch.Options{Layout: layout})
		if err != nil {
			t.Fatal(err)
		}
		raw := fileBytes(t, b)
		back, err := batch.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fileBytes(t, back), raw) {
			t.Errorf("%s: decoded batch writes different bytes", layout)
		}
		// The same file at an address no array type is aligned to decodes
		// (copied, not viewed) to the same batch.
		odd := append([]byte{0}, raw...)[1:]
		if shifted, err := batch.Decode(odd); err != nil || !bytes.Equal(fileBytes(t, shifted), raw) {
			t.Errorf("%s: the file decoded from a misaligned buffer differs: %v", layout, err)
		}
		f, err := safetensors.Read(raw)
		if err != nil {
			t.Fatal(err)
		}
		if f.Metadata["run"] != "llm" || f.Metadata["step"] != "1" || f.Metadata["layout"] != string(layout) ||
			f.Metadata["rows"] != fmt.Sprint(b.Len()) || f.Metadata["policy_version_min"] == "" ||
			f.Metadata["credit"] != "repeat" || f.Metadata["credit_rule"] != batch.CreditRule(batch.Repeat) ||
			f.Metadata["loss_norm"] != "token-mean" || f.Metadata["loss_tokens"] != fmt.Sprint(b.LossTokens) ||
			f.Metadata["turn_rewards_dropped"] == "0" || f.Metadata["format"] != "patrdb-batch/2" {
			t.Errorf("%s: metadata %v", layout, f.Metadata)
		}
		// A file of another format or credit is not read as this one.
		for key, v := range map[string]string{"format": "patrdb-batch/1", "credit": "sum", "loss_norm": ""} {
			md := maps.Clone(f.Metadata)
			md[key] = v
			var buf bytes.Buffer
			if _, err := safetensors.Write(&buf, md, b.Tensors()); err != nil {
				t.Fatal(err)
			}
			if _, err := batch.Decode(buf.Bytes()); !errors.Is(err, batch.ErrNotBatch) {
				t.Errorf("%s: %s=%q: %v", layout, key, v, err)
			}
		}
		// A truncated or damaged file is refused, never half read.
		for _, bad := range [][]byte{raw[:len(raw)-1], raw[:7], append([]byte{0xff, 0xff, 0, 0, 0, 0, 0, 0}, raw[8:]...)} {
			if _, err := batch.Decode(bad); !errors.Is(err, batch.ErrNotBatch) || !errors.Is(err, safetensors.ErrFormat) {
				t.Errorf("%s: damaged file: %v", layout, err)
			}
		}
	}
}

// ReadInto reuses a batch's buffers; a smaller batch read into the
// buffers of a larger one must not keep any of its values.
func TestReadIntoReuse(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	var reused batch.Batch
	for _, opts := range []batch.Options{{}, {ExcludePruned: true}, {Groups: []uint64{2}}, {}} {
		err := db.View(func(tx *store.Tx) error {
			r, _ := tx.Run("llm")
			fresh, err := batchdb.Read(r, 1, opts)
			if err != nil {
				return err
			}
			if err := batchdb.ReadInto(&reused, r, 1, opts); err != nil {
				return err
			}
			sameBatch(t, fmt.Sprintf("%+v", opts), &reused, fresh)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A reused batch's arrays are cleared over all the length the read
// needs, not only over the length they came with: here each holds 9s
// beyond it.
func TestReadIntoReuseClearsBeyondTheLength(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	fresh, err := batchdb.ReadDB(db, "llm", 1, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(fresh.LossMask)
	reused := batch.Batch{LossMask: slices.Repeat([]uint8{9}, n)[:n/3]}
	for _, a := range []*[]float32{&reused.OldLogprobs, &reused.Advantages, &reused.CoefPos, &reused.CoefNeg, &reused.LossWeight, &reused.TurnRewards} {
		*a = slices.Repeat([]float32{9}, n)[:n/3]
	}
	err = db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("llm")
		return batchdb.ReadInto(&reused, r, 1, batch.Options{})
	})
	if err != nil {
		t.Fatal(err)
	}
	sameBatch(t, "arrays with 9s beyond their length", &reused, fresh)
}
