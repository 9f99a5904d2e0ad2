package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// A branch page of one run that points at itself: VerifyRun and CheckRun
// of that run name the bucket and the page, without bbolt touching it; the
// other run verifies and checks clean; RunTx.Verify of a whole run is nil.
func TestVerifyRunFindsALoopInOneRun(t *testing.T) {
	path := tempPath(t, "loop.db")
	o := storetest.Options()
	o.PageSize = 1024
	db, err := store.Open(path, o) // not storetest's: it checks the file at the end
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *store.Tx) error {
		for _, id := range []string{"a", "b"} {
			r, err := tx.CreateRun(id, nil, nil)
			if err != nil {
				return err
			}
			g, err := r.OpenGroup(store.GroupSpec{Step: 1})
			if err != nil {
				return err
			}
			for i := range 40 { // enough node records for a branch page
				if _, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: i}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	view(t, db, func(tx *store.Tx) error {
		r, err := tx.Run("a")
		if err != nil {
			return err
		}
		if err := verify(r); err != nil {
			t.Errorf("Verify of a sound run: %v", err)
		}
		return nil
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Point the first element of run a's nodes root (a branch) at itself.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = bdb.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("runs")).Bucket([]byte("a")).Bucket([]byte("nodes")).Root())
		if p, err := tx.Page(int(root)); err != nil || p.Type != "branch" {
			t.Fatalf("nodes root %d: %+v %v, want a branch", root, p, err)
		}
		return nil
	})
	_ = bdb.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.NativeEndian.PutUint64(b[int(root)*1024+16+8:], root)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	ro, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	view(t, ro, func(tx *store.Tx) error {
		if err := walk(tx, "", store.CheckRunList); err != nil {
			t.Errorf("VerifyRuns: %v (the runs bucket is sound)", err)
		}
		if err := walk(tx, "", store.CheckMetas); err != nil {
			t.Errorf("VerifyMetas: %v", err)
		}
		err := walk(tx, "a", store.CheckPages)
		var ce *store.CorruptError
		if !errors.As(err, &ce) || ce.Bucket != "runs/a/nodes" || !strings.Contains(ce.Reason, "is referenced twice") {
			t.Errorf("VerifyRun(a) = %v", err)
		}
		if vs, err := tx.Check(&store.CheckOptions{Run: "a"}); !errors.Is(err, store.ErrCorrupt) || len(vs) != 1 || vs[0].Kind != "structure" || vs[0].Bucket != "runs/a/nodes" {
			t.Errorf("Check of run a = %v, %v", vs, err)
		}
		if err := walk(tx, "", store.CheckPages); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("VerifyFile = %v", err)
		}
		if err := walk(tx, "b", store.CheckPages); err != nil {
			t.Errorf("VerifyRun(b) = %v", err)
		}
		if vs, err := tx.Check(&store.CheckOptions{Run: "b"}); err != nil || len(vs) != 0 {
			t.Errorf("Check of run b = %v, %v", vs, err)
		}
		if _, err := tx.Check(&store.CheckOptions{Run: "nope"}); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Check of run nope = %v", err)
		}
		return nil
	})
}

// A damaged meta page is reported to a read-only reader, whose snapshot is
// then the commit before the last.
func TestVerifyMetas(t *testing.T) {
	path := tempPath(t, "meta.db")
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *store.Tx) error { _, err := tx.CreateRun("a", nil, nil); return err })
	pageSize := int64(db.Options().PageSize)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The txid of meta page 1, inside the checksummed part.
	if _, err := f.WriteAt([]byte{0xff}, pageSize+16+48); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ro, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	view(t, ro, func(tx *store.Tx) error {
		if err := walk(tx, "", store.CheckMetas); !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "meta page 1") {
			t.Errorf("VerifyMetas = %v", err)
		}
		return nil
	})
}

// bucketRoot is the file offset of the root page of run r's sub-bucket
// name, a branch page in a checkedFile.
func bucketRoot(t *testing.T, path, name string) int {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var root int
	_ = bdb.View(func(tx *bolt.Tx) error {
		root = int(tx.Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte(name)).Root())
		return nil
	})
	return root * checkedPageSize
}

// loopBack points the last child of the branch page at off back at the
// page itself: a cursor that follows it never ends.
func loopBack(b []byte, off int) {
	last := int(binary.NativeEndian.Uint16(b[off+10:])) - 1
	binary.NativeEndian.PutUint64(b[off+16+16*last+8:], uint64(off/checkedPageSize))
}

// verifyParts walks the pages of run r's summary and of parts.
func verifyParts(t *testing.T, path string, parts store.CheckParts) error {
	t.Helper()
	db := openReadOnly(t, path)
	defer db.Close()
	return db.View(func(tx *store.Tx) error { return walk(tx, "r", store.CheckSummary|parts) })
}

// walk is Check of parts alone, as one error.
func walk(tx *store.Tx, run string, parts store.CheckParts) error {
	_, err := tx.Check(&store.CheckOptions{Run: run, Parts: parts})
	return err
}

// verify is Check of r's whole run, as one error.
func verify(r *store.RunTx) error {
	_, err := r.Tx().Check(&store.CheckOptions{Run: r.ID()})
	return err
}

// A walk of parts covers the pages of the parts it is given, beside the
// summary's, and no others: a looping page in the event log or the
// advantage records fails the walk of that part, naming its bucket, and
// not the walk of the summary or of the other part; a looping page in the
// turns, which no part reads, fails only the whole-run check.
func TestCheckPartsWalksThePartsItIsGiven(t *testing.T) {
	f := buildCheckedFile(t, 12)
	all := []store.CheckParts{store.CheckEvents, store.CheckAdvantages}
	if err := verifyParts(t, f.path, store.CheckEvents|store.CheckAdvantages); err != nil {
		t.Fatalf("sound file: %v", err)
	}
	for _, c := range []struct {
		bucket string
		part   store.CheckParts // the part that reads it; 0 for none
	}{
		{"events", store.CheckEvents},
		{"adv", store.CheckAdvantages},
		{"turns", 0},
	} {
		t.Run(c.bucket, func(t *testing.T) {
			root := bucketRoot(t, f.path, c.bucket)
			path := damagedCopy(t, f.path, func(b []byte) { loopBack(b, root) })
			if err := verifyParts(t, path, 0); err != nil {
				t.Errorf("summary's pages: %v, want nil", err)
			}
			for _, p := range all {
				err := verifyParts(t, path, p)
				switch {
				case p != c.part && err != nil:
					t.Errorf("part %#x: %v, want nil", p, err)
				case p == c.part && !errors.Is(err, store.ErrCorrupt):
					t.Errorf("part %#x: %v, want ErrCorrupt", p, err)
				case p == c.part && !strings.Contains(err.Error(), "runs/r/"+c.bucket):
					t.Errorf("part %#x: %q does not name runs/r/%s", p, err, c.bucket)
				}
			}
			if err := verifyRun(t, path); !errors.Is(err, store.ErrCorrupt) {
				t.Errorf("whole-run check: %v, want ErrCorrupt", err)
			}
		})
	}
}

// Once a walk of parts has covered the event log's pages, a damaged event in
// it is an ErrCorrupt from Events, naming the bucket, not a short log.
func TestVerifiedPartsStillCheckEachRecord(t *testing.T) {
	f := buildCheckedFile(t, 4)
	at := storetest.ValueAt(t, f.path, "r", "events", u64(3))
	path := damagedCopy(t, f.path, func(b []byte) { b[at+8] ^= 0x20 })
	if err := verifyParts(t, path, store.CheckEvents); err != nil {
		t.Fatalf("the pages are sound: %v", err)
	}
	db := openReadOnly(t, path)
	defer db.Close()
	n := 0
	err := db.ViewRun("r", func(r *store.RunTx) error {
		return r.Events(1, func(model.Event) error { n++; return nil })
	})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "runs/r/events") {
		t.Fatalf("Events over a damaged event: %v after %d events, want ErrCorrupt naming runs/r/events", err, n)
	}
}

func TestCheckPartsRefusesUnknownOrRunlessParts(t *testing.T) {
	f := buildCheckedFile(t, 1)
	if err := verifyParts(t, f.path, 1<<7); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("part 1<<7: %v, want ErrInvalid", err)
	}
	db := openReadOnly(t, f.path)
	defer db.Close()
	if err := db.View(func(tx *store.Tx) error { return walk(tx, "", store.CheckEvents) }); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("events without a run: %v, want ErrInvalid", err)
	}
}

// ViewTurns in checked mode reads what the plain ViewTurns reads; over a turns
// page that points back at itself, which the plain cursor would follow
// forever, it returns ErrCorrupt naming the turns bucket.
func TestCheckedViewTurns(t *testing.T) {
	f := buildCheckedFile(t, 12)
	var segs []model.Segment // read plainly, so the damage below is met by ViewTurns first
	db := openReadOnly(t, f.path)
	inRun(t, db, false, "r", func(r *store.RunTx) (err error) { segs, err = r.Path(f.leaf); return })
	db.Close()
	view := func(path string) (out []store.TurnView, err error) {
		db := openReadOnly(t, path)
		defer db.Close()
		err = db.View(func(tx *store.Tx) error {
			cr, err := checkedRun(tx, "r")
			if err != nil {
				return err
			}
			views, err := cr.ViewTurns(segs)
			for _, v := range views { // they alias the transaction's pages
				out = append(out, store.TurnView{ActionTokens: bytes.Clone(v.ActionTokens), ActionLogprobs: bytes.Clone(v.ActionLogprobs),
					ObservationTokens: bytes.Clone(v.ObservationTokens), Reward: v.Reward, Done: v.Done, PolicyVersion: v.PolicyVersion})
			}
			return err
		})
		return out, err
	}
	got, err := view(f.path)
	if err != nil || len(got) != 6 {
		t.Fatalf("checked view of the leaf's path: %d turns, %v; want 6", len(got), err)
	}
	want := readPlain(t, f.path, f.leaf).Traj
	for i := range got {
		if !bytes.Equal(got[i].ActionTokens, u32bytes(want[i].Turn.ActionTokens)) {
			t.Fatalf("turn %d: checked view differs from the plain trajectory", i)
		}
	}
	root := bucketRoot(t, f.path, "turns")
	path := damagedCopy(t, f.path, func(b []byte) { loopBack(b, root) })
	done := make(chan error, 1)
	go func() { _, err := view(path); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "runs/r/turns") {
			t.Fatalf("over a looping turns page: %v, want ErrCorrupt naming runs/r/turns", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the checked view over a looping turns page did not return in 30 s")
	}
}

// u32bytes is ids as ViewTurns gives them: 4 little-endian bytes each.
func u32bytes(ids []uint32) []byte {
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, id)
	}
	return b
}

// A reader's page walks read the file its bbolt maps, not whatever is at
// the path now: once a damaged copy is renamed over the path (a restore
// or a compacted copy moved into place while a server reads), the checks
// of the open DB still find the file it reads sound, and a DB opened
// after the rename finds the damage.
func TestPageWalksReadTheOpenFileNotThePath(t *testing.T) {
	f := buildCheckedFile(t, 4)
	damaged := damagedCopy(t, f.path, func(b []byte) { loopBack(b, bucketRoot(t, f.path, "nodes")) })
	db := openReadOnly(t, f.path)
	defer db.Close()
	if err := os.Rename(damaged, f.path); err != nil {
		t.Fatal(err)
	}
	view(t, db, func(tx *store.Tx) error {
		if vs, err := tx.Check(&store.CheckOptions{Run: "r"}); err != nil || len(vs) != 0 {
			t.Errorf("Check of the open file after a rename over its path = %v, %v", vs, err)
		}
		if err := walk(tx, "r", store.CheckPages|store.CheckMetas); err != nil {
			t.Errorf("page walk of the open file after a rename over its path: %v", err)
		}
		return nil
	})
	if _, err := bucketSizes(db, true); err != nil {
		t.Errorf("checked BucketSizes of the open file after a rename over its path: %v", err)
	}
	reopened := openReadOnly(t, f.path)
	defer reopened.Close()
	if _, err := bucketSizes(reopened, true); !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("checked BucketSizes of the file now at the path = %v, want ErrCorrupt", err)
	}
}

// bucketSizes is RunTx.BucketSizes of run r, in checked mode if checked.
func bucketSizes(db *store.DB, checked bool) (sizes []model.BucketSize, err error) {
	err = db.View(func(tx *store.Tx) error {
		if checked {
			if err := tx.CheckReads(); err != nil {
				return err
			}
		}
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		sizes, err = r.BucketSizes()
		return err
	})
	return sizes, err
}
