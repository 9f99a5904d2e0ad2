package store_test

import (
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
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
