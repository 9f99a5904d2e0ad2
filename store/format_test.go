package store_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
	bolt "go.etcd.io/bbolt"
)

// fileFormat reads the format version straight from the meta bucket.
func fileFormat(t *testing.T, path string) uint64 {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var v uint64
	if err := bdb.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket([]byte("meta")).Get([]byte("format")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFormat1ReadAsIs: a format-1 file (the committed fuzz base, written
// before format 2) opens read-only and writable without a byte changing,
// reads back with the fields format 2 added at their zero values, checks
// clean, and is stamped format 2 by its first write, which then reads both
// shapes side by side.
func TestFormat1ReadAsIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	copyFile(t, "testdata/fuzz/FuzzFile-base.db", path)
	if got := fileFormat(t, path); got != 1 {
		t.Fatalf("fixture has format %d, want 1", got)
	}
	before := fileDigest(t, path)
	var run string
	for _, ro := range []bool{true, false} {
		db, err := store.Open(path, &store.Options{ReadOnly: ro, Timeout: time.Second})
		if err != nil {
			t.Fatalf("read-only %t: %v", ro, err)
		}
		vs, err := db.Check()
		if err != nil || len(vs) > 0 {
			t.Fatalf("read-only %t: check %v %v", ro, vs, err)
		}
		if err := db.View(func(tx *store.Tx) error {
			ids, err := tx.RunIDs()
			if err != nil || len(ids) == 0 {
				t.Fatalf("runs %v %v", ids, err)
			}
			run = ids[0]
			r, _ := tx.Run(run)
			gs, err := r.Groups(1)
			if err != nil || len(gs) == 0 {
				t.Fatalf("groups of step 1: %v %v", gs, err)
			}
			tr, err := r.Trajectory(gs[0].Roots[0])
			if err != nil {
				t.Fatalf("trajectory: %v", err)
			}
			for _, pt := range tr {
				if pt.PolicyVersion != 0 {
					t.Errorf("a format-1 turn read policy version %d", pt.PolicyVersion)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if fileDigest(t, path) != before {
			t.Fatalf("read-only %t: opening a format-1 file changed it", ro)
		}
	}

	db, err := store.Open(path, &store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var g store.Group
	if err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		if g, err = r.OpenGroup(store.GroupSpec{Step: 99, Task: "v2", PromptTokens: []uint32{1, 2, 70000}}); err != nil {
			return err
		}
		n, err := r.AddNode(store.NodeSpec{Step: 99, Group: g.ID})
		if err != nil {
			return err
		}
		return r.AppendTurns(n.ID, 0, store.Turn{Action: "a", ActionTokens: []uint32{5}, ActionLogprobs: []float32{-0.5}, PolicyVersion: 3})
	}); err != nil {
		t.Fatal(err)
	}
	vs, err := db.Check()
	if err != nil || len(vs) > 0 {
		t.Fatalf("check after the first write: %v %v", vs, err)
	}
	if err := db.View(func(tx *store.Tx) error {
		r, _ := tx.Run(run)
		got, err := r.GroupAt(99, g.ID)
		if err != nil {
			return err
		}
		if len(got.PromptTokens) != 3 || got.PromptTokens[2] != 70000 {
			t.Errorf("prompt tokens read back as %v", got.PromptTokens)
		}
		tr, err := r.Trajectory(got.Roots[0])
		if err != nil || len(tr) != 1 || tr[0].PolicyVersion != 3 {
			t.Errorf("format-2 turn read back as %+v, %v", tr, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := fileFormat(t, path); got != store.FormatVersion {
		t.Errorf("after a write the file has format %d, want %d", got, store.FormatVersion)
	}
}
