package store_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// checkedFile is a run of many groups on 1 KiB pages (so each bucket is a
// b-tree of several levels): its latest group, the one the checked-read tests
// read, and the first, whose records it must not need.
type checkedFile struct {
	path           string
	latest, first  model.Group
	leaf, firstOne uint64 // a leaf of the latest group; a node of the first
}

const checkedPageSize = 1024

// buildCheckedFile writes groups of steps 1..steps, each a tree of three
// roots expanded twice, every node with two turns, the leaves completed
// with a reward and an advantage.
func buildCheckedFile(t *testing.T, steps int) checkedFile {
	t.Helper()
	f := checkedFile{path: tempPath(t, "checked.db")}
	o := syncOptions()
	o.NoSync = true
	o.PageSize = checkedPageSize
	db, err := store.Open(f.path, o)
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= steps; step++ {
		update(t, db, func(tx *store.Tx) error {
			r, err := tx.Run("r")
			if errors.Is(err, model.ErrNotFound) {
				r, err = tx.CreateRun("r", nil, nil)
			}
			if err != nil {
				return err
			}
			g, err := r.OpenGroup(store.GroupSpec{Step: uint64(step), Task: fmt.Sprintf("task-%d", step)})
			if err != nil {
				return err
			}
			var leaves []uint64
			var grow func(parent uint64, depth, ordinal int) error
			grow = func(parent uint64, depth, ordinal int) error {
				fork := 0
				if parent != 0 {
					fork = 2
				}
				n, err := r.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: parent, Fork: fork, Ordinal: ordinal})
				if err != nil {
					return err
				}
				if err := r.AppendTurns(n.ID, 0, textTurns(fmt.Sprintf("n%d-", n.ID), 2)...); err != nil {
					return err
				}
				if depth == 2 {
					leaves = append(leaves, n.ID)
					if err := r.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
						return err
					}
					return r.SetReward(n.ID, float64(n.ID%2))
				}
				if err := r.SetNodeStatus(n.ID, model.NodeExpanded); err != nil {
					return err
				}
				for i := range 2 {
					if err := grow(n.ID, depth+1, i); err != nil {
						return err
					}
				}
				return nil
			}
			for i := range 3 {
				if err := grow(0, 0, i); err != nil {
					return err
				}
			}
			for _, l := range leaves {
				if err := r.PutAdvantage(model.Advantage{Step: g.Step, Group: g.ID, Leaf: l, Outcome: float64(l % 2), Total: float64(l % 2), Mean: 0.5, Std: 0.5}); err != nil {
					return err
				}
			}
			if step == 1 {
				if f.first, err = r.GroupAt(g.Step, g.ID); err != nil {
					return err
				}
				f.firstOne = f.first.Roots[0]
			}
			f.leaf = leaves[len(leaves)-1]
			f.latest, err = r.GroupAt(g.Step, g.ID)
			return err
		})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// checkedReads is what `tree RUN latest` and `traj RUN LEAF` read, through
// checked reads, or the first error.
type checkedReads struct {
	Group      model.Group
	Nodes      []model.Node
	Advantages []model.Advantage
	Traj       []model.PathTurn
	Path       []model.Segment
}

// checkedRun is tx.Run(id) in checked mode.
func checkedRun(tx *store.Tx, id string) (*store.RunTx, error) {
	if err := tx.CheckReads(); err != nil {
		return nil, err
	}
	return tx.Run(id)
}

func readChecked(t *testing.T, path string, leaf uint64) (out checkedReads, err error) {
	t.Helper()
	o := store.DefaultOptions()
	o.ReadOnly, o.PageSize = true, checkedPageSize
	db, err := store.Open(path, o)
	if err != nil {
		return out, err
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		done <- db.View(func(tx *store.Tx) error {
			c, err := checkedRun(tx, "r")
			if err != nil {
				return err
			}
			if out.Group, err = c.LatestGroup(); err != nil {
				return err
			}
			if out.Nodes, err = c.GroupNodes(out.Group); err != nil {
				return err
			}
			if out.Advantages, err = c.Advantages(out.Group.Step, out.Group.ID); err != nil {
				return err
			}
			if out.Path, err = c.Path(leaf); err != nil {
				return err
			}
			out.Traj, err = c.Trajectory(leaf)
			return err
		})
	}()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("checked reads hung")
	}
	return out, err
}

// readPlain is readChecked through the plain RunTx of a sound file.
func readPlain(t *testing.T, path string, leaf uint64) (out checkedReads) {
	t.Helper()
	db := openReadOnly(t, path)
	defer db.Close()
	inRun(t, db, false, "r", func(r *store.RunTx) (err error) {
		if out.Group, err = r.LatestGroup(); err != nil {
			return err
		}
		if out.Nodes, err = r.GroupNodes(out.Group); err != nil {
			return err
		}
		if out.Advantages, err = r.Advantages(out.Group.Step, out.Group.ID); err != nil {
			return err
		}
		if out.Path, err = r.Path(leaf); err != nil {
			return err
		}
		out.Traj, err = r.Trajectory(leaf)
		return err
	})
	return out
}

// openReadOnly opens path read-only (a damaged copy opens: its damage is
// in a run's pages, which Open does not read).
func openReadOnly(t *testing.T, path string) *store.DB {
	t.Helper()
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// verifyRun is RunTx.Verify of run r: the whole-run check.
func verifyRun(t *testing.T, path string) error {
	t.Helper()
	db := openReadOnly(t, path)
	defer db.Close()
	return db.View(func(tx *store.Tx) error {
		if err := walk(tx, "r", store.CheckPages); err != nil {
			return err
		}
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		return verify(r)
	})
}

// damagedCopy rewrites a copy of src through fn and returns its path.
func damagedCopy(t *testing.T, src string, fn func(b []byte)) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	fn(b)
	dst := tempPath(t, "damaged.db")
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A sound file reads the same through checked reads as through the plain
// handle.
func TestCheckedReadsReadWhatThePlainReadsRead(t *testing.T) {
	f := buildCheckedFile(t, 12)
	got, err := readChecked(t, f.path, f.leaf)
	if err != nil {
		t.Fatal(err)
	}
	want := readPlain(t, f.path, f.leaf)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("checked reads differ from the plain ones:\n%+v\n%+v", got, want)
	}
	if len(got.Nodes) != 21 || len(got.Advantages) != 12 || len(got.Traj) != 6 {
		t.Errorf("latest group: %d nodes, %d advantages, trajectory of %d turns; want 21, 12, 6", len(got.Nodes), len(got.Advantages), len(got.Traj))
	}
}

// Damage on what `tree RUN latest` reads fails it with ErrCorrupt naming
// the bucket, without a hang; damage elsewhere in the run leaves those
// reads whole (and only the whole-run check finds it).
func TestCheckedReadsFailOnlyOnWhatTheyRead(t *testing.T) {
	f := buildCheckedFile(t, 12)
	want := readPlain(t, f.path, f.leaf)
	nodeAt := storetest.ValueAt(t, f.path, "r", "nodes", u64(f.leaf))
	firstAt := storetest.ValueAt(t, f.path, "r", "nodes", u64(f.firstOne))
	turnKey := func(node uint64) []byte {
		var n model.Node
		db := openReadOnly(t, f.path)
		defer db.Close()
		inRun(t, db, false, "r", func(r *store.RunTx) (err error) { n, err = r.Node(node); return })
		k := u64(n.TurnRanges[0].Seq)
		return append(k, u64(node)...)
	}
	turnAt := storetest.ValueAt(t, f.path, "r", "turns", turnKey(f.leaf))
	firstTurnAt := storetest.ValueAt(t, f.path, "r", "turns", turnKey(f.firstOne))
	page := func(at int) int { return at / checkedPageSize * checkedPageSize }
	nodesRoot := bucketRoot(t, f.path, "nodes")
	advRoot := bucketRoot(t, f.path, "adv")
	for _, c := range []struct {
		name    string
		damage  func(b []byte)
		onPath  bool
		mention string
	}{
		{"a node record of the latest group", func(b []byte) { b[nodeAt+3] ^= 0x40 }, true, fmt.Sprintf("runs/r/nodes: key %x: CRC32C mismatch", u64(f.leaf))},
		{"a turn of its leaf", func(b []byte) { b[turnAt+5] ^= 0x40 }, true, "runs/r/turns"},
		{"the element count of the leaf page holding that node", func(b []byte) { b[page(nodeAt)+10]++ }, true, "runs/r/nodes"},
		{"the nodes root's last child pointing back at the root", func(b []byte) { loopBack(b, nodesRoot) }, true, "runs/r/nodes"},
		{"the advantages root's last child pointing back at the root", func(b []byte) { loopBack(b, advRoot) }, true, "runs/r/adv"},
		{"a node record of the first group", func(b []byte) { b[firstAt+3] ^= 0x40 }, false, ""},
		{"a turn of the first group", func(b []byte) { b[firstTurnAt+5] ^= 0x40 }, false, ""},
		{"the nodes root's first child pointing back at the root", func(b []byte) {
			binary.NativeEndian.PutUint64(b[nodesRoot+16+8:], uint64(nodesRoot/checkedPageSize))
		}, false, ""},
		{"the header of the leaf page holding the first group's root", func(b []byte) { clear(b[page(firstAt) : page(firstAt)+16]) }, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := damagedCopy(t, f.path, c.damage)
			got, err := readChecked(t, path, f.leaf)
			switch {
			case c.onPath && !errors.Is(err, store.ErrCorrupt):
				t.Fatalf("read: %v, want ErrCorrupt", err)
			case c.onPath && !strings.Contains(err.Error(), c.mention):
				t.Errorf("error %q does not name %s", err, c.mention)
			case !c.onPath && err != nil:
				t.Fatalf("damage off the read path: %v", err)
			case !c.onPath && !reflect.DeepEqual(got, want):
				t.Errorf("damage off the read path changed what is read:\n%+v\n%+v", got, want)
			}
			if err := verifyRun(t, path); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("whole-run check: %v, want ErrCorrupt", err)
			}
		})
	}
}

// What a checked read costs follows what it reads, not the run: reading
// the latest group (and a leaf's trajectory) of a run three times as
// large checks about as many pages.
func TestCheckedReadCostFollowsTheRead(t *testing.T) {
	pages := func(steps int) (checked int, total int64) {
		f := buildCheckedFile(t, steps)
		db := openReadOnly(t, f.path)
		defer db.Close()
		view(t, db, func(tx *store.Tx) error {
			c, err := checkedRun(tx, "r")
			if err != nil {
				return err
			}
			g, err := c.LatestGroup()
			if err != nil {
				return err
			}
			if _, err := c.GroupNodes(g); err != nil {
				return err
			}
			if _, err := c.Advantages(g.Step, g.ID); err != nil {
				return err
			}
			_, err = c.Trajectory(f.leaf)
			checked = store.CheckedPages(c)
			return err
		})
		fi, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		return checked, fi.Size() / checkedPageSize
	}
	small, smallTotal := pages(10)
	big, bigTotal := pages(30)
	t.Logf("10 steps: %d of %d pages checked; 30 steps: %d of %d", small, smallTotal, big, bigTotal)
	if big > small+small/2 || big*4 > int(bigTotal) {
		t.Errorf("checked %d pages at 10 steps (of %d), %d at 30 (of %d): want about the same, a small share", small, smallTotal, big, bigTotal)
	}
}

// A run's bucket sizes read pages, not records: in checked mode they walk
// the run's pages with bounds and decode nothing. So a damaged record
// leaves them as the plain read gives them (the whole-run check is what
// finds it), and a branch page pointing back at its root fails them with
// ErrCorrupt naming the bucket, where bbolt's Bucket.Stats would recurse
// until the stack overflowed.
func TestCheckedBucketSizesReadPagesNotRecords(t *testing.T) {
	f := buildCheckedFile(t, 12)
	sizes := func(path string, checked bool) (out []model.BucketSize, err error) {
		t.Helper()
		db := openReadOnly(t, path)
		defer db.Close()
		done := make(chan error, 1)
		go func() {
			var err error
			out, err = bucketSizes(db, checked)
			done <- err
		}()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("BucketSizes hung")
		}
		return out, err
	}
	want, err := sizes(f.path, false)
	if err != nil || len(want) == 0 {
		t.Fatalf("plain BucketSizes of a sound file: %v, %v", want, err)
	}
	if got, err := sizes(f.path, true); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("checked BucketSizes of a sound file = %v, %v; want %v", got, err, want)
	}

	nodeAt := storetest.ValueAt(t, f.path, "r", "nodes", u64(f.leaf))
	record := damagedCopy(t, f.path, func(b []byte) { b[nodeAt+3] ^= 0x40 })
	if got, err := sizes(record, true); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("checked BucketSizes with a damaged node record = %v, %v; want %v", got, err, want)
	}
	if err := verifyRun(t, record); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("whole-run check of the damaged record: %v, want ErrCorrupt", err)
	}

	loop := damagedCopy(t, f.path, func(b []byte) { loopBack(b, bucketRoot(t, f.path, "nodes")) })
	_, err = sizes(loop, true)
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "runs/r/nodes") {
		t.Errorf("checked BucketSizes with a branch page pointing at its root = %v, want ErrCorrupt naming runs/r/nodes", err)
	}
}

// Each checked read checks what it reads on its own, whatever was read
// before it in the transaction: the group's advantages read first, with
// their bucket's root pointing back at itself, are ErrCorrupt naming the
// bucket. Read plainly, the same file gives them without an error.
func TestCheckedAdvantagesAloneFindALoop(t *testing.T) {
	f := buildCheckedFile(t, 12)
	path := damagedCopy(t, f.path, func(b []byte) { loopBack(b, bucketRoot(t, f.path, "adv")) })
	db := openReadOnly(t, path)
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		done <- db.View(func(tx *store.Tx) error {
			r, err := checkedRun(tx, "r")
			if err != nil {
				return err
			}
			_, err = r.Advantages(f.latest.Step, f.latest.ID)
			return err
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "runs/r/adv") {
			t.Errorf("checked Advantages over a looped bucket = %v, want ErrCorrupt naming runs/r/adv", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("checked Advantages hung")
	}
}

// A checked read with no narrow check (the event log) checks the whole run
// first, so damage anywhere in the run fails it, and every such read of
// the transaction after it, with the same ErrCorrupt; the narrow reads of
// undamaged records still answer.
func TestCheckedWholeRunReadsFailOnDamageAnywhere(t *testing.T) {
	f := buildCheckedFile(t, 4)
	firstAt := storetest.ValueAt(t, f.path, "r", "nodes", u64(f.firstOne))
	path := damagedCopy(t, f.path, func(b []byte) { b[firstAt+3] ^= 0x40 })
	db := openReadOnly(t, path)
	defer db.Close()
	err := db.View(func(tx *store.Tx) error {
		r, err := checkedRun(tx, "r")
		if err != nil {
			return err
		}
		events := func() error { return r.Events(1, func(model.Event) error { return nil }) }
		first := events()
		if !errors.Is(first, store.ErrCorrupt) || !strings.Contains(first.Error(), "runs/r/") {
			t.Errorf("checked Events of a run with a damaged node record = %v, want ErrCorrupt naming where in run r", first)
		}
		if again := events(); again == nil || again.Error() != first.Error() {
			t.Errorf("the second whole-run read = %v, want %v", again, first)
		}
		if _, err := r.LatestGroup(); err != nil {
			t.Errorf("a narrow read of undamaged records after it: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
