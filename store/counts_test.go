package store_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

func summary(t *testing.T, db *store.DB, o model.SummaryOptions) model.RunSummary {
	t.Helper()
	var s model.RunSummary
	inRun(t, db, false, "r1", func(r *store.RunTx) (err error) { s, err = r.Summary(o); return })
	return s
}

func ptr(x float64) *float64 { return &x }

// fixtureSummary is what buildFixture's run holds, counted by hand.
func fixtureSummary(lastSeq uint64) model.RunSummary {
	return model.RunSummary{
		Run: "r1", Status: model.RunRunning, LastStep: 2, Groups: 2, OpenGroups: 2, OpenStep: fixtureStep,
		Nodes: 6, Leaves: 2, Frontier: 2, Turns: 9, TurnsMaterialised: 3, PrefixSharing: 3.0 / 9,
		Rewarded: 2, MeanReward: ptr(0.5), Events: lastSeq,
		ByStatus: map[model.NodeStatus]int{model.NodeActive: 2, model.NodeExpanded: 1, model.NodeCompleted: 1,
			model.NodePruned: 1, model.NodeTruncated: 0, model.NodeFailed: 1},
		Steps: []model.StepSummary{{Step: fixtureStep, Groups: 2, OpenGroups: 2, Nodes: 6, Turns: 9, Leaves: 2, Rewarded: 2, MeanReward: ptr(0.5)}},
	}
}

// dropCounters makes the file at path look written before the counters
// existed.
func dropCounters(t *testing.T, path string) {
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		run := tx.Bucket([]byte("runs")).Bucket([]byte("r1"))
		for _, name := range []string{"counts", "groupids"} {
			if err := run.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestSummaryFromCounters(t *testing.T) {
	db := storetest.Open(t)
	buildFixture(t, db)
	var seq uint64
	inRun(t, db, false, "r1", func(r *store.RunTx) error { seq = r.LastSeq(); return nil })
	got := summary(t, db, model.SummaryOptions{Steps: true})
	if want := fixtureSummary(seq); !reflect.DeepEqual(got, want) {
		t.Fatalf("summary\n got %+v\nwant %+v", got, want)
	}
	if got := summary(t, db, model.SummaryOptions{}); got.Steps != nil || got.Buckets != nil || got.Bytes != 0 {
		t.Errorf("steps and buckets without asking: %+v", got)
	}
	withBytes := summary(t, db, model.SummaryOptions{Buckets: true})
	var sum int64
	for _, b := range withBytes.Buckets {
		sum += b.Bytes
	}
	if len(withBytes.Buckets) == 0 || withBytes.Bytes != sum || sum == 0 {
		t.Errorf("bytes %d over buckets %+v", withBytes.Bytes, withBytes.Buckets)
	}
}

// TestSummaryInsideTheWrite: a summary read in the transaction that
// changed the counters sees the change before it is committed.
func TestSummaryInsideTheWrite(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	inRun(t, db, true, "r1", func(r *store.RunTx) error {
		if err := r.SetNodeStatus(f.X, model.NodeTruncated); err != nil {
			return err
		}
		s, err := r.Summary(model.SummaryOptions{})
		if err != nil {
			return err
		}
		if s.ByStatus[model.NodeTruncated] != 1 || s.Leaves != 3 || s.Frontier != 1 || s.TurnsMaterialised != 4 {
			t.Errorf("inside the write: %+v", s)
		}
		return nil
	})
}

// TestSummaryWithoutCounters: a file written before the counters is read
// as it is (walked, and said so), untouched; its first write counts it.
func TestSummaryWithoutCounters(t *testing.T) {
	path := goodFile(t)
	dropCounters(t, path)
	before := fileDigest(t, path)
	ro := storetest.Options()
	ro.ReadOnly = true
	rdb := storetest.OpenPath(t, path, ro)
	f := readFixture(t, rdb)
	var seq uint64
	inRun(t, rdb, false, "r1", func(r *store.RunTx) error { seq = r.LastSeq(); return nil })
	got := summary(t, rdb, model.SummaryOptions{Steps: true})
	want := fixtureSummary(seq)
	want.Walked = true
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("walked summary\n got %+v\nwant %+v", got, want)
	}
	inRun(t, rdb, false, "r1", func(r *store.RunTx) error {
		g, err := r.Group(f.G2.ID)
		if err != nil || g.ID != f.G2.ID || g.Task != "t2" {
			t.Errorf("Group(%d) without the index: %+v %v", f.G2.ID, g, err)
		}
		if _, err := r.Group(999); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Group(999): %v, want ErrNotFound", err)
		}
		return nil
	})
	storetest.MustCheckClose(t, rdb)
	if fileDigest(t, path) != before {
		t.Fatal("reading a file without counters changed it")
	}

	db := storetest.OpenPath(t, path, storetest.Options())
	inRun(t, db, true, "r1", func(r *store.RunTx) error { return r.SetNodeStatus(f.X, model.NodeTruncated) })
	got = summary(t, db, model.SummaryOptions{Steps: true})
	if got.Walked || got.ByStatus[model.NodeTruncated] != 1 || got.Leaves != 3 || got.Nodes != 6 || got.Groups != 2 {
		t.Errorf("after the first write: %+v", got)
	}
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		g, err := r.Group(f.G1.ID)
		if err != nil || g.ID != f.G1.ID {
			t.Errorf("Group(%d) through the rebuilt index: %+v %v", f.G1.ID, g, err)
		}
		return nil
	})
}

// TestCheckComparesCounters: Check recomputes the counters and the group
// index from the records and names the step that differs; Recount mends
// them.
func TestCheckComparesCounters(t *testing.T) {
	good := goodFile(t)
	cases := []struct {
		name   string
		damage func(t *testing.T, tx *bolt.Tx)
		want   []wantV
	}{
		{"a step's nodes off by one", func(t *testing.T, tx *bolt.Tx) {
			b := runBucket(tx, "r1", "counts")
			for _, step := range []uint64{0, fixtureStep} {
				raw := b.Get(beKey(step))
				var c []any
				unframeRecord(t, raw, &c)
				c[3].([]any)[0] = int64(5) // active nodes
				mustPut(t, b, beKey(step), frameRecord(t, c))
			}
		}, []wantV{inv("counts", beKey(0), "the records say"), inv("counts", beKey(fixtureStep), "the records say")}},
		{"a step with no records", func(t *testing.T, tx *bolt.Tx) {
			b := runBucket(tx, "r1", "counts")
			raw := b.Get(beKey(fixtureStep))
			mustPut(t, b, beKey(7), append([]byte(nil), raw...))
		}, []wantV{inv("counts", beKey(7), "no records")}},
		{"a group missing from the index", func(t *testing.T, tx *bolt.Tx) {
			b := runBucket(tx, "r1", "groupids")
			k, _ := b.Cursor().First()
			if err := b.Delete(k); err != nil {
				t.Fatal(err)
			}
		}, []wantV{inv("groupids", nil, "lists 1 of the 2 groups")}},
		{"an index entry at the wrong step", func(t *testing.T, tx *bolt.Tx) {
			b := runBucket(tx, "r1", "groupids")
			k, _ := b.Cursor().First()
			id := binary.BigEndian.Uint64(k)
			if err := b.Delete(k); err != nil {
				t.Fatal(err)
			}
			mustPut(t, b, k2(id, 9), nil)
		}, []wantV{inv("groupids", nil, "lists 1 of the 2"), inv("groupids", nil, "at step 9")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := tempPath(t, "counts.db")
			copyFile(t, good, path)
			rawUpdate(t, path, func(tx *bolt.Tx) error { c.damage(t, tx); return nil })
			db, err := store.Open(path, storetest.Options())
			if err != nil {
				t.Fatal(err)
			}
			vs, err := db.Check(nil)
			if err != nil && !errors.Is(err, store.ErrCorrupt) {
				t.Fatal(err)
			}
			if diff := sameCounterViolations(vs, c.want); diff != "" {
				t.Error(diff)
			}
			inRun(t, db, true, "r1", func(r *store.RunTx) error { return r.Recount() })
			if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
				t.Errorf("after Recount: %v %v", vs, err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// sameCounterViolations is sameViolations where a key of nil in want
// matches any key (an index entry's key depends on the fixture's ids).
func sameCounterViolations(got []store.Violation, want []wantV) string {
	var fixed []wantV
	for _, w := range want {
		if w.key == nil {
			for _, v := range got {
				if v.Bucket == "runs/r1/"+w.bucket && strings.Contains(v.Detail, w.detail) {
					w.key = v.Key
					break
				}
			}
		}
		fixed = append(fixed, w)
	}
	return sameViolations("runs/r1/", got, fixed)
}

// TestZeroVarianceGroups: a group counts once, by its first leaf's
// advantage, however often its advantages are rewritten.
func TestZeroVarianceGroups(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	zv := func(want int) {
		t.Helper()
		if got := summary(t, db, model.SummaryOptions{}).ZeroVarianceGroups; got != want {
			t.Errorf("zero-variance groups %d, want %d", got, want)
		}
	}
	put := func(leaf uint64, zero bool) {
		t.Helper()
		inRun(t, db, true, "r1", func(r *store.RunTx) error {
			return r.PutAdvantage(model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: leaf, Mean: 0.5, ZeroVariance: zero})
		})
	}
	zv(0)
	first, second := min(f.P, f.C), max(f.P, f.C)
	put(second, true) // not the group's first record: the first says no
	zv(0)
	put(first, true)
	zv(1)
	put(first, true) // rewritten alike
	zv(1)
	put(first, false)
	zv(0)
}

func deleteRunBucket(tx *store.Tx, name string) error {
	return storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r1")).DeleteBucket([]byte(name))
}

// openWithout opens a copy of the fixture file whose run r1 lost one of its
// buckets; the caller closes it.
func openWithout(t *testing.T, gone string) *store.DB {
	t.Helper()
	path := tempPath(t, "damaged.db")
	copyFile(t, goodFile(t), path)
	db, err := store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *store.Tx) error { return deleteRunBucket(tx, gone) })
	return db
}

// A run missing its counters or its group index (one lost, or a file from
// before they existed) has both rebuilt from the records by its next
// write, and the file checks clean afterwards; a damaged node met while
// rebuilding refuses the write as corrupt.
func TestCountersRebuiltOnWrite(t *testing.T) {
	for _, gone := range []string{"counts", "groupids"} {
		db := openWithout(t, gone)
		update(t, db, func(tx *store.Tx) error {
			r, err := tx.Run("r1")
			if err != nil {
				return err
			}
			_, err = r.OpenGroup(store.GroupSpec{Step: fixtureStep})
			return err
		})
		vs, err := db.Check(nil)
		if cerr := db.Close(); (err != nil && !errors.Is(err, store.ErrCorrupt)) || cerr != nil {
			t.Fatal(err, cerr)
		}
		if len(vs) != 0 {
			t.Errorf("without %s, after a write: %v, want a clean file", gone, vs)
		}
	}
}

func TestCountersRebuildRefusesDamagedNode(t *testing.T) {
	db := openWithout(t, "counts")
	defer db.Close()
	err := db.Update(func(tx *store.Tx) error {
		nodes := rawBucket(t, tx, "r1", "nodes")
		k, _ := nodes.Cursor().First()
		if err := nodes.Put(append([]byte(nil), k...), []byte{0x01, 0, 0, 0, 0, 0x90}); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.OpenGroup(store.GroupSpec{Step: fixtureStep})
		return err
	})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("a write rebuilding counters over a damaged node: %v, want ErrCorrupt", err)
	}
}
