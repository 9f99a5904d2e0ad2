package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

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
