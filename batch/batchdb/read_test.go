package batchdb_test

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/internal/batchtest"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

var llm = batchtest.LLMSpec{Steps: 2, Groups: 3, Roots: 3, Depth: 3, MaxTurns: 4, Tokens: 300, Seed: 5}

// fileOf is b's file.
func fileOf(t *testing.T, b *batch.Batch) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ReadSource gives, of every closed group of the step in id order, the
// leaves the options include, in id order, each with its stored path and
// advantage; the open groups by id; every node on a path once, in id
// order, with the turns the longest path through it takes, their arrays
// the stored ones.
func TestReadSourceIsTheStepsRecords(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	for _, opts := range []batch.Options{{}, {ExcludePruned: true, IncludeFailed: true}, {ExcludeTruncated: true}, {Groups: []uint64{3, 2}}, {Groups: []uint64{5}}} {
		err := db.ViewRun("llm", func(r *store.RunTx) error {
			for step := uint64(1); step <= uint64(llm.Steps); step++ {
				groups, err := r.Groups(step)
				if err != nil {
					return err
				}
				src, err := batchdb.ReadSource(r, step, opts)
				if opts.Groups != nil {
					groups = slices.DeleteFunc(groups, func(g model.Group) bool { return !slices.Contains(opts.Groups, g.ID) })
					if len(groups) < len(opts.Groups) {
						if !errors.Is(err, model.ErrNotFound) {
							t.Errorf("step %d, groups %v of which %d are the step's: %v, want ErrNotFound", step, opts.Groups, len(groups), err)
						}
						continue
					}
				}
				if err != nil {
					return err
				}
				var closed, open []uint64
				var leaves []batch.SourceLeaf
				need := map[uint64]int{}
				for _, g := range groups {
					if g.Status != model.GroupClosed {
						open = append(open, g.ID)
						continue
					}
					advs, err := r.Advantages(step, g.ID)
					if err != nil {
						return err
					}
					adv := map[uint64]float64{}
					for _, a := range advs {
						adv[a.Leaf] = a.Advantage
					}
					nodes, err := r.GroupNodes(g)
					if err != nil {
						return err
					}
					slices.SortFunc(nodes, func(a, b model.Node) int { return cmp.Compare(a.ID, b.ID) })
					for _, n := range nodes {
						if !opts.Includes(n.Status) {
							continue
						}
						path, err := r.Path(n.ID)
						if err != nil {
							return err
						}
						for _, s := range path {
							need[s.Node] = max(need[s.Node], s.Count)
						}
						leaves = append(leaves, batch.SourceLeaf{ID: n.ID, Group: len(closed), Status: n.Status, Reward: n.Reward, Advantage: adv[n.ID], Path: path})
					}
					closed = append(closed, g.ID)
				}
				var gotClosed []uint64
				for _, g := range src.Groups {
					gotClosed = append(gotClosed, g.ID)
				}
				if !slices.Equal(gotClosed, closed) || !slices.Equal(src.Open, open) || len(src.Leaves) != len(leaves) {
					t.Fatalf("step %d %+v: groups %v open %v, %d leaves; want %v, %v, %d", step, opts, gotClosed, src.Open, len(src.Leaves), closed, open, len(leaves))
				}
				for i, l := range leaves {
					g := src.Leaves[i]
					if g.ID != l.ID || g.Group != l.Group || g.Status != l.Status || g.Reward != l.Reward || g.Advantage != l.Advantage || !slices.Equal(g.Path, l.Path) {
						t.Errorf("step %d leaf %d: %+v, want %+v", step, i, g, l)
					}
				}
				if len(src.Nodes) != len(need) {
					t.Errorf("step %d %+v: %d nodes, %d on the paths", step, opts, len(src.Nodes), len(need))
				}
				at := 0
				for i, n := range src.Nodes {
					if i > 0 && n.Node <= src.Nodes[i-1].Node || need[n.Node] != n.Count {
						t.Fatalf("step %d: node %d with %d turns (after %v), want %d", step, n.Node, n.Count, src.Nodes[:i], need[n.Node])
					}
					delete(need, n.Node)
					for k, tv := range src.Turns[at : at+n.Count] {
						want, err := r.Turn(n.Node, k)
						if err != nil {
							return err
						}
						if !bytes.Equal(tv.ActionTokens, model.PackWords(want.ActionTokens)) || !bytes.Equal(tv.ObservationTokens, model.PackWords(want.ObservationTokens)) ||
							!bytes.Equal(tv.ActionLogprobs, model.PackFloats(want.ActionLogprobs)) || tv.Reward != want.Reward || tv.PolicyVersion != want.PolicyVersion {
							t.Errorf("step %d: turn %d of node %d differs from the stored one", step, k, n.Node)
						}
					}
					at += n.Count
				}
				if len(need) != 0 || at != len(src.Turns) {
					t.Errorf("step %d: nodes %v missing; %d turns, %d claimed", step, need, len(src.Turns), at)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestErrors(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	if _, err := batchdb.ReadDB(db, "llm", 9, batch.Options{}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("step without groups: %v", err)
	}
	if _, err := batchdb.ReadDB(db, "llm", 1, batch.Options{Groups: []uint64{99}}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("group not in step: %v", err)
	}
	if _, err := batchdb.ReadDB(db, "nope", 1, batch.Options{}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("missing run: %v", err)
	}
	for _, o := range []batch.Options{{Layout: "packed"}, {MinPolicyVersion: 5, MaxPolicyVersion: 4}, {Credit: "sum"}, {Norm: "seq-mean"}} {
		if _, err := batchdb.ReadDB(db, "llm", 1, o); !errors.Is(err, batch.ErrInvalidOptions) || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// A damaged turn value is ErrCorrupt, never a batch.
	flip := func() {
		err := storetest.Bolt(db).Update(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("runs")).Bucket([]byte("llm")).Bucket([]byte("turns"))
			k, v := b.Cursor().First()
			v = bytes.Clone(v)
			v[len(v)-3] ^= 0xff
			return b.Put(bytes.Clone(k), v)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	flip()
	if b, err := batchdb.ReadDB(db, "llm", 1, batch.Options{IncludeFailed: true}); !errors.Is(err, store.ErrCorrupt) || b != nil {
		t.Errorf("damaged turn: %v", err)
	}
	flip() // restored, so the closing check passes
}

// A trainer's list of groups may come in any order and name one twice (a
// retried step's groups appended to the first try's): each group is read
// once, in id order, so the batch is the one of the sorted list.
func TestGroupsInAnyOrderReadEachOnce(t *testing.T) {
	db := storetest.Open(t)
	batchtest.BuildLLM(t, db, "llm", llm)
	all, err := batchdb.ReadDB(db, "llm", 1, batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Groups) < 2 {
		t.Fatalf("fixture: step 1 has groups %v, want two or more", all.Groups)
	}
	g := all.Groups
	sorted, err := batchdb.ReadDB(db, "llm", 1, batch.Options{Groups: []uint64{g[0], g[1]}})
	if err != nil {
		t.Fatal(err)
	}
	shuffled, err := batchdb.ReadDB(db, "llm", 1, batch.Options{Groups: []uint64{g[1], g[0], g[1]}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fileOf(t, shuffled), fileOf(t, sorted)) {
		t.Error("groups given as [b, a, b]: not the batch of [a, b]")
	}
}
