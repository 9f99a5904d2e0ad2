package batch_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/internal/batchtest"
	"github.com/patrdb/patrdb/batch/internal/split"
	"github.com/patrdb/patrdb/model"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/safetensors"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// treeIndex maps every token of the rows layout, row after row, to the
// token of the tree layout it repeats.
func treeIndex(tree *batch.Batch) []int64 {
	var out, path []int64
	for _, last := range tree.RowSegment {
		path = path[:0]
		for s := last; s >= 0; s = tree.SegParent[s] {
			path = append(path, s)
		}
		slices.Reverse(path)
		for _, s := range path {
			for i := tree.SegOffsets[s]; i < tree.SegOffsets[s+1]; i++ {
				out = append(out, i)
			}
		}
	}
	return out
}

// clipped is the PPO/GRPO token loss −min(ρA, clip(ρ, 1−ε, 1+ε)A).
func clipped(rho, a, eps float64) float64 {
	return -min(rho*a, max(min(rho, 1+eps), 1-eps)*a)
}

// rowsLoss is the clipped loss over the rows layout as a trainer computes
// it from loss_mask and advantages alone: token-mean divides the summed
// token losses by the trained tokens, seq-mean-token-mean averages each
// row over its trained tokens, then over the rows that train any.
func rowsLoss(rows *batch.Batch, norm batch.Norm, rho func(i int) float64, eps float64) float64 {
	var total, n float64
	var seqs []float64
	for r := range rows.Len() {
		var sum, cnt float64
		for i := rows.RowOffsets[r]; i < rows.RowOffsets[r+1]; i++ {
			if rows.LossMask[i] == 1 {
				sum += clipped(rho(int(i)), float64(rows.Advantages[i]), eps)
				cnt++
			}
		}
		total, n = total+sum, n+cnt
		if cnt > 0 {
			seqs = append(seqs, sum/cnt)
		}
	}
	if norm == batch.TokenMean {
		if n == 0 {
			return 0
		}
		return total / n
	}
	mean := 0.0
	for _, s := range seqs {
		mean += s / float64(len(seqs))
	}
	return mean
}

// coefLoss is the loss from the coefficients alone, over either layout.
func coefLoss(b *batch.Batch, rho func(i int) float64, eps float64) float64 {
	l := 0.0
	for i := range b.CoefPos {
		r := rho(i)
		l += -float64(b.CoefPos[i])*min(r, 1+eps) + float64(b.CoefNeg[i])*max(r, 1-eps)
	}
	return l
}

func near(got, want, rel float64) bool {
	return math.Abs(got-want) <= rel*math.Max(math.Abs(want), 1e-12)
}

// The tree layout's coefficients make the clipped loss over the packed
// tree equal the rows loss — computed from the rows' mask and advantages
// only — for every credit rule and normalisation, and every option set:
// each tree token's coefficients and weight are the sums of its copies'
// in the rows, its copies are trained once per row under Repeat and once
// under Mean and Owner, and the weights sum to 1.
func TestTreeLossEqualsRowsLoss(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	rng := rand.New(rand.NewPCG(3, 4))
	for step := uint64(1); step <= uint64(llm.Steps); step++ {
		for _, base := range optionSets[:4] {
			for _, c := range creditNorms {
				opts := base
				opts.Credit, opts.Norm = c.Credit, c.Norm
				name := fmt.Sprintf("step %d %+v", step, opts)
				rows, err := batchdb.ReadDB(db, "llm", step, opts)
				if err != nil {
					t.Fatal(err)
				}
				opts.Layout = batch.Tree
				tree, err := batchdb.ReadDB(db, "llm", step, opts)
				if err != nil {
					t.Fatal(err)
				}
				idx := treeIndex(tree)
				if len(idx) != len(rows.InputIDs) {
					t.Fatalf("%s: %d row tokens map to the tree, rows hold %d", name, len(idx), len(rows.InputIDs))
				}
				pos, neg, w := make([]float64, len(tree.InputIDs)), make([]float64, len(tree.InputIDs)), make([]float64, len(tree.InputIDs))
				trained, copies := make([]int, len(tree.InputIDs)), make([]int, len(tree.InputIDs))
				for i, j := range idx {
					if rows.InputIDs[i] != tree.InputIDs[j] || rows.Positions[i] != tree.Positions[j] {
						t.Fatalf("%s: row token %d is not tree token %d", name, i, j)
					}
					pos[j] += float64(rows.CoefPos[i])
					neg[j] += float64(rows.CoefNeg[i])
					w[j] += float64(rows.LossWeight[i])
					trained[j] += int(rows.LossMask[i])
					copies[j]++
				}
				sumW := 0.0
				for j := range tree.InputIDs {
					if !near(float64(tree.CoefPos[j]), pos[j], 1e-6) || !near(float64(tree.CoefNeg[j]), neg[j], 1e-6) || !near(float64(tree.LossWeight[j]), w[j], 1e-6) {
						t.Fatalf("%s: tree token %d: coefficients %v/%v weight %v, its rows' sum %v/%v weight %v", name, j,
							tree.CoefPos[j], tree.CoefNeg[j], tree.LossWeight[j], pos[j], neg[j], w[j])
					}
					want := 0
					if tree.LossMask[j] == 1 {
						want = 1
						if c.Credit == batch.Repeat {
							want = copies[j]
						}
					}
					if trained[j] != want {
						t.Fatalf("%s: tree token %d (in %d rows) is trained in %d of them, want %d", name, j, copies[j], trained[j], want)
					}
					sumW += float64(tree.LossWeight[j])
				}
				if tree.LossTokens > 0 && !near(sumW, 1, 1e-5) {
					t.Errorf("%s: the tree's weights sum to %v, want 1", name, sumW)
				}
				for _, eps := range []float64{0.2, 0.05} {
					ratio := make([]float64, len(tree.InputIDs))
					for j := range ratio {
						ratio[j] = math.Exp(rng.NormFloat64() * 0.3)
					}
					want := rowsLoss(rows, c.Norm, func(i int) float64 { return ratio[idx[i]] }, eps)
					got := coefLoss(tree, func(j int) float64 { return ratio[j] }, eps)
					fromRows := coefLoss(rows, func(i int) float64 { return ratio[idx[i]] }, eps)
					if !near(got, want, 1e-5) || !near(fromRows, want, 1e-5) || want == 0 {
						t.Errorf("%s, ε=%v: tree loss %v, rows' coefficient loss %v, rows loss %v", name, eps, got, fromRows, want)
					}
				}
			}
		}
	}
}

// Repeat trains every leaf's whole trajectory with its advantage, so its
// loss is GRPO's over the leaves as independent samples, and it is not
// the loss of the other rules: under Repeat a token shared by k rows
// weighs k times what it weighs under Mean, whose advantage is the mean.
func TestRepeatCountsASharedTokenOncePerLeaf(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	read := func(c batch.Credit) *batch.Batch {
		b, err := batchdb.ReadDB(db, "llm", 1, batch.Options{Credit: c, Layout: batch.Tree})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	repeat, mean := read(batch.Repeat), read(batch.Mean)
	rows, err := batchdb.ReadDB(db, "llm", 1, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	copies := make([]int, len(repeat.InputIDs))
	for _, j := range treeIndex(repeat) {
		copies[j]++
	}
	shared := 0
	for j, k := range copies {
		if repeat.LossMask[j] == 0 {
			continue
		}
		if k > 1 {
			shared++
		}
		// Token-mean: repeat's c⁺ − c⁻ is Σ_r A_r / N_repeat, mean's is
		// mean(A) / N_mean, so N_repeat·repeat's is k·N_mean·mean's.
		scale := float64(repeat.LossTokens) / float64(mean.LossTokens)
		got := (float64(repeat.CoefPos[j]) - float64(repeat.CoefNeg[j])) * scale
		want := float64(k) * (float64(mean.CoefPos[j]) - float64(mean.CoefNeg[j]))
		if tol := 1e-5 * (float64(repeat.CoefPos[j]) + float64(repeat.CoefNeg[j])) * scale; math.Abs(got-want) > tol {
			t.Fatalf("tree token %d in %d rows: repeat's net coefficient ×%v = %v, %d × mean's = %v", j, k, scale, got, k, want)
		}
	}
	if shared == 0 {
		t.Error("the fixture shares no action token")
	}
	if rows.LossTokens != sumMask(rows) || repeat.LossTokens != rows.LossTokens {
		t.Errorf("loss tokens: rows %d (mask sum %d), tree %d", rows.LossTokens, sumMask(rows), repeat.LossTokens)
	}
	if rows.Credit != batch.Repeat || rows.Norm != batch.TokenMean {
		t.Errorf("default options read credit %q norm %q, want repeat and token-mean", rows.Credit, rows.Norm)
	}
}

func sumMask(b *batch.Batch) int64 {
	n := int64(0)
	for _, m := range b.LossMask {
		n += int64(m)
	}
	return n
}

// Owner writes exactly the tensors format 1 wrote: the SHA-256 of every
// format-1 tensor of this fixture's batches, as the format-1 code (commit
// d9068f4) wrote them, is in testdata/format1-owner.json.
func TestOwnerIsFormat1(t *testing.T) {
	raw, err := os.ReadFile("testdata/format1-owner.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]map[string]string
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	checked := 0
	for key, want := range golden {
		var step uint64
		var oi int
		var layout batch.Layout
		if _, err := fmt.Sscanf(key, "step%d/options%d/%s", &step, &oi, &layout); err != nil {
			t.Fatalf("golden key %q: %v", key, err)
		}
		opts := optionSets[oi]
		opts.Layout, opts.Credit = layout, batch.Owner
		b, err := batchdb.ReadDB(db, "llm", step, opts)
		if err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Read(fileBytes(t, b))
		if err != nil {
			t.Fatal(err)
		}
		for name, sum := range want {
			h := sha256.Sum256(f.Tensors[name].Data)
			if got := hex.EncodeToString(h[:]); got != sum {
				t.Errorf("%s: tensor %s differs from format 1's", key, name)
			}
			checked++
		}
	}
	if checked < 18*12 {
		t.Errorf("checked %d tensors, want every tensor of 18 batches", checked)
	}
}

// A value that does not fit its tensor refuses the batch: a token id of
// 2^31 written before the store refused it, and a policy version above
// int64.
func TestOutOfRange(t *testing.T) {
	db := storetest.Open(t)
	var leaf uint64
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, PromptTokens: []uint32{1, 0x7fffabce}})
		if err != nil {
			return err
		}
		for i, v := range []uint64{1, math.MaxInt64 + 1} {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			leaf = n.ID
			must(r.AppendTurns(n.ID, 0, model.Turn{Action: "a", ActionTokens: []uint32{0x7fffabcd, 5}, PolicyVersion: v}))
			must(r.SetReward(n.ID, 1))
			must(r.SetNodeStatus(n.ID, model.NodeCompleted))
			must(r.PutAdvantage(model.Advantage{Step: 1, Group: g.ID, Leaf: n.ID}))
		}
		return r.CloseGroup(1, g.ID)
	}))
	_, err := batchdb.ReadDB(db, "r", 1, batch.Options{})
	if !errors.Is(err, batch.ErrOutOfRange) || !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("policy version %d on the path of node %d", uint64(math.MaxInt64+1), leaf)) {
		t.Errorf("version above int64: %v", err)
	}
	// The window leaves the wide version out: the batch reads.
	if _, err := batchdb.ReadDB(db, "r", 1, batch.Options{MaxPolicyVersion: 5}); err != nil {
		t.Errorf("window without the wide version: %v", err)
	}
	setWideID(t, db, "turns", 0x7fffabcd)
	for _, layout := range []batch.Layout{batch.Rows, batch.Tree} {
		b, err := batchdb.ReadDB(db, "r", 1, batch.Options{Layout: layout, MaxPolicyVersion: 5})
		if !errors.Is(err, batch.ErrOutOfRange) || b != nil || !strings.Contains(err.Error(), "action token 0 of turn 0 of node") ||
			!strings.Contains(err.Error(), fmt.Sprint(uint32(0xffffabcd))) {
			t.Errorf("%s: id of 2^31 and more: %v", layout, err)
		}
	}
	setWideID(t, db, "turns", 0xffffabcd) // restored, so the closing check passes
	setWideID(t, db, "groups", 0x7fffabce)
	if _, err := batchdb.ReadDB(db, "r", 1, batch.Options{MaxPolicyVersion: 5}); !errors.Is(err, batch.ErrOutOfRange) ||
		!strings.Contains(err.Error(), fmt.Sprintf("prompt token 1 of group 1 is %d", uint32(0xffffabce))) {
		t.Errorf("prompt id of 2^31 and more: %v", err)
	}
	setWideID(t, db, "groups", 0xffffabce)
}

// With the token checks split over goroutines, the error is still the
// first in node order: every node here holds a wide id, and the one named
// is the first.
func TestParallelChecksNameTheFirstWideID(t *testing.T) {
	db := storetest.Open(t)
	var nodes []uint64
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: 1, PromptTokens: []uint32{1}})
		if err != nil {
			return err
		}
		for i := range 6 {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i})
			if err != nil {
				return err
			}
			nodes = append(nodes, n.ID)
			turn := model.Turn{Action: "a", ActionTokens: []uint32{3, 4}, ObservationTokens: []uint32{5, 0x7fffabcd}}
			for _, f := range []error{r.AppendTurns(n.ID, 0, turn, turn), r.SetReward(n.ID, 1), r.SetNodeStatus(n.ID, model.NodeCompleted),
				r.PutAdvantage(model.Advantage{Step: 1, Group: g.ID, Leaf: n.ID})} {
				if f != nil {
					return f
				}
			}
		}
		return r.CloseGroup(1, g.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	setWideID(t, db, "turns", 0x7fffabcd)
	defer split.Lower(1)()
	_, err = batchdb.ReadDB(db, "r", 1, batch.Options{})
	if want := fmt.Sprintf("observation token 1 of turn 0 of node %d is", nodes[0]); !errors.Is(err, batch.ErrOutOfRange) || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
}

// setWideID rewrites, in every record of run r's bucket (turns, groups),
// the token id from as from ^ 1<<31, keeping each value's CRC32C sound: a
// record as a file written before the store refused such ids holds it.
func setWideID(t *testing.T, db *store.DB, bucket string, from uint32) {
	t.Helper()
	old, repl := binary.LittleEndian.AppendUint32(nil, from), binary.LittleEndian.AppendUint32(nil, from^1<<31)
	err := storetest.Bolt(db).Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte(bucket))
		changed := 0
		err := b.ForEach(func(k, v []byte) error {
			if !bytes.Contains(v, old) {
				return nil
			}
			v = bytes.ReplaceAll(bytes.Clone(v), old, repl)
			binary.BigEndian.PutUint32(v[1:5], crc32.Checksum(v[5:], crc32.MakeTable(crc32.Castagnoli)))
			changed++
			return b.Put(bytes.Clone(k), v)
		})
		if err == nil && changed == 0 {
			err = fmt.Errorf("no record of %s holds id %#x", bucket, from)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
