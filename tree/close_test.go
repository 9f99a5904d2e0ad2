package tree_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
	bolt "go.etcd.io/bbolt"
)

// Abandoning a step whose groups partly closed already — the usual case:
// most finished, a few are stuck — gives up the open ones only: the
// closed group and its nodes stay as they were.
func TestAbandonLeavesClosedGroupsAlone(t *testing.T) {
	db := storetest.Open(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	groups := openStep(t, c, 1, tasks(2))
	closed := groups[0]
	if err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for _, id := range closed.Roots {
			if err := r.FailNode(id, "env crashed"); err != nil {
				return err
			}
		}
		return r.CloseGroup(1, closed.ID)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *store.Tx) error { return c.Abandon(tx, 1, "stuck") }); err != nil {
		t.Fatalf("abandoning a step with a closed group: %v", err)
	}
	for _, n := range dumpRun(t, db, "r").Nodes {
		want := "abandoned: stuck"
		if n.Group == closed.ID {
			want = "env crashed"
		}
		if n.Status != model.NodeFailed || n.Error != want {
			t.Errorf("node %d of group %d: %s %q, want failed %q", n.ID, n.Group, n.Status, n.Error, want)
		}
	}
}

// Abandoning a step one of whose group records is damaged is ErrCorrupt,
// with nothing written: never the groups that could be read abandoned
// and the rest left open.
func TestAbandonOfADamagedStepWritesNothing(t *testing.T) {
	db := openUnchecked(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	groups := openStep(t, c, 1, tasks(2))
	damageGroup(t, db, "r", 1, groups[1].ID)
	err := db.Update(func(tx *store.Tx) error { return c.Abandon(tx, 1, "stuck") })
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("abandoning a step with a damaged group record: %v, want ErrCorrupt", err)
	}
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		for _, id := range groups[0].Roots {
			if n, err := r.Node(id); err != nil || n.Status != model.NodeActive {
				t.Errorf("root %d of the readable group after a refused abandon: %s, %v", id, n.Status, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// openUnchecked opens a store for a test that damages it: no node cache
// (a read comes from the file) and no check at cleanup.
func openUnchecked(t *testing.T) *store.DB {
	t.Helper()
	opts := storetest.Options()
	opts.CacheNodes = store.NoCache
	db, err := store.Open(filepath.Join(t.TempDir(), "patr.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// damageGroup flips the last byte of group id's record, so reading it
// fails its checksum.
func damageGroup(t *testing.T, db *store.DB, run string, step, id uint64) {
	t.Helper()
	damageRecord(t, db, run, "groups", binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, step), id))
}

// damageNode does the same to node id's record.
func damageNode(t *testing.T, db *store.DB, run string, id uint64) {
	t.Helper()
	damageRecord(t, db, run, "nodes", binary.BigEndian.AppendUint64(nil, id))
}

// damageRecord flips the last byte of the record under key in the run's
// bucket (the run's own bucket when bucket is "").
func damageRecord(t *testing.T, db *store.DB, run, bucket string, key []byte) {
	t.Helper()
	if err := storetest.Bolt(db).Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("runs")).Bucket([]byte(run))
		if bucket != "" {
			b = b.Bucket([]byte(bucket))
		}
		v := bytes.Clone(b.Get(key))
		if v == nil {
			return fmt.Errorf("no %s record under %x", bucket, key)
		}
		v[len(v)-1] ^= 0xff
		return b.Put(key, v)
	}); err != nil {
		t.Fatal(err)
	}
}
