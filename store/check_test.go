package store_test

// Check finds damage made below the API with raw bbolt writes, says what
// kind it is and where, and reads without changing the file.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/vmihailenco/msgpack/v5"
	bolt "go.etcd.io/bbolt"
)

// frameRecord encodes v as the store frames a value (doc.go): format byte 1,
// CRC32C of the payload, msgpack payload.
func frameRecord(tb testing.TB, v any) []byte {
	tb.Helper()
	p, err := msgpack.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]byte, 5, 5+len(p))
	out[0] = 1
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, p...)
}

// unframeRecord decodes a framed value without checking its CRC.
func unframeRecord(tb testing.TB, raw []byte, v any) {
	tb.Helper()
	if err := msgpack.Unmarshal(raw[5:], v); err != nil {
		tb.Fatal(err)
	}
}

func beKey(x uint64) []byte { return binary.BigEndian.AppendUint64(nil, x) }

// runBucket is runs/<run>/<name> in a raw bbolt transaction.
func runBucket(tx *bolt.Tx, run, name string) *bolt.Bucket {
	return tx.Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte(name))
}

func TestCheckCleanStore(t *testing.T) {
	path := goodFile(t)
	db := storetest.OpenPath(t, path, syncOptions())
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) || len(vs) != 0 {
		t.Fatalf("Check of a good store: %v %v", vs, err)
	}
}

func TestCheckFindsDamage(t *testing.T) {
	good := goodFile(t)
	// Read the fixture's ids back from the file it wrote.
	db := storetest.OpenPath(t, good, syncOptions())
	var f fixture
	f.Run = "r1"
	view(t, db, func(tx *store.Tx) error {
		r, err := tx.Run(f.Run)
		if err != nil {
			return err
		}
		gs, err := r.Groups(fixtureStep)
		if err != nil {
			return err
		}
		f.G1 = gs[0]
		nodes, err := r.GroupNodes(f.G1)
		if err != nil {
			return err
		}
		// GroupNodes: roots A P C F in order, then B.
		f.A, f.P, f.C, f.F, f.B = nodes[0].ID, nodes[1].ID, nodes[2].ID, nodes[3].ID, nodes[4].ID
		return nil
	})
	a0, b1 := turnKeyOf(t, db, "r1", f.A, 0), turnKeyOf(t, db, "r1", f.B, 1)
	db.Close()

	const run = "runs/r1/"
	cases := []struct {
		name   string
		damage func(t *testing.T, tx *bolt.Tx)
		kind   string
		bucket string
		key    []byte
		detail string
		// api is a read through the public API that must fail with ErrCorrupt.
		api func(r *store.RunTx) error
	}{
		{
			name: "flipped byte in a node value",
			damage: func(t *testing.T, tx *bolt.Tx) {
				b := runBucket(tx, "r1", "nodes")
				v := bytes.Clone(b.Get(beKey(f.B)))
				v[len(v)-1] ^= 0x40
				if err := b.Put(beKey(f.B), v); err != nil {
					t.Fatal(err)
				}
			},
			kind: "corrupt", bucket: run + "nodes", key: beKey(f.B), detail: "CRC",
			api: func(r *store.RunTx) error { _, err := r.Node(f.B); return err },
		},
		{
			name: "dangling parent",
			damage: func(t *testing.T, tx *bolt.Tx) {
				b := runBucket(tx, "r1", "nodes")
				var n model.Node
				unframeRecord(t, b.Get(beKey(f.B)), &n)
				n.Parent = 999
				if err := b.Put(beKey(f.B), frameRecord(t, &n)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "nodes", key: beKey(f.B), detail: "parent 999 does not exist",
			api: func(r *store.RunTx) error { _, err := r.Trajectory(f.B); return err },
		},
		{
			name: "fork point past the parent's turns",
			damage: func(t *testing.T, tx *bolt.Tx) {
				b := runBucket(tx, "r1", "nodes")
				var n model.Node
				unframeRecord(t, b.Get(beKey(f.B)), &n)
				n.Fork, n.Base = 7, 7
				if err := b.Put(beKey(f.B), frameRecord(t, &n)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "nodes", key: beKey(f.B), detail: "fork point 7",
			api: func(r *store.RunTx) error { _, err := r.Trajectory(f.B); return err },
		},
		{
			name: "frontier entry for a pruned node",
			damage: func(t *testing.T, tx *bolt.Tx) {
				if err := runBucket(tx, "r1", "frontier").Put(beKey(f.P), []byte{}); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "frontier", key: beKey(f.P), detail: "pruned",
		},
		{
			name: "active node missing from the frontier",
			damage: func(t *testing.T, tx *bolt.Tx) {
				if err := runBucket(tx, "r1", "frontier").Delete(beKey(f.B)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "nodes", key: beKey(f.B), detail: "frontier",
		},
		{
			name: "missing turn",
			damage: func(t *testing.T, tx *bolt.Tx) {
				if err := runBucket(tx, "r1", "turns").Delete(b1); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "nodes", key: beKey(f.B), detail: "1 turns stored, record says 2",
			api: func(r *store.RunTx) error { _, err := r.Trajectory(f.B); return err },
		},
		{
			name: "flipped byte in a turn",
			damage: func(t *testing.T, tx *bolt.Tx) {
				b := runBucket(tx, "r1", "turns")
				k := a0
				v := bytes.Clone(b.Get(k))
				v[10] ^= 0x01
				if err := b.Put(k, v); err != nil {
					t.Fatal(err)
				}
			},
			kind: "corrupt", bucket: run + "turns", key: a0, detail: "CRC",
			api: func(r *store.RunTx) error { _, err := r.Trajectory(f.B); return err }, // B inherits A's turn 0
		},
		{
			name: "event sequence gap",
			damage: func(t *testing.T, tx *bolt.Tx) {
				if err := runBucket(tx, "r1", "events").Delete(beKey(3)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "events", key: beKey(4), detail: "jumps from 2 to 4",
		},
		{
			name: "children index without the child",
			damage: func(t *testing.T, tx *bolt.Tx) {
				if err := runBucket(tx, "r1", "children").Delete(append(beKey(f.A), beKey(f.B)...)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "nodes", key: beKey(f.B), detail: "children index",
		},
		{
			name: "advantage of a non-leaf",
			damage: func(t *testing.T, tx *bolt.Tx) {
				a := model.Advantage{Step: fixtureStep, Group: f.G1.ID, Leaf: f.A}
				k := append(append(beKey(fixtureStep), beKey(f.G1.ID)...), beKey(f.A)...)
				if err := runBucket(tx, "r1", "adv").Put(k, frameRecord(t, &a)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "adv", key: append(append(beKey(fixtureStep), beKey(f.G1.ID)...), beKey(f.A)...), detail: "not a leaf",
		},
		{
			name: "rubric in an unknown pool",
			damage: func(t *testing.T, tx *bolt.Tx) {
				b := runBucket(tx, "r1", "rubrics")
				var rb model.Rubric
				unframeRecord(t, b.Get(beKey(1)), &rb)
				rb.Pool = "limbo"
				if err := b.Put(beKey(1), frameRecord(t, &rb)); err != nil {
					t.Fatal(err)
				}
			},
			kind: "invariant", bucket: run + "rubrics", key: beKey(1), detail: "unknown pool",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.db")
			copyFile(t, good, path)
			rawUpdate(t, path, func(tx *bolt.Tx) error { c.damage(t, tx); return nil })
			before := fileDigest(t, path)
			// Not storetest.OpenPath: its Check at cleanup would (rightly)
			// fail on the damage this test makes on purpose.
			db, err := store.Open(path, syncOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			vs, err := db.Check(nil)
			if err != nil && !errors.Is(err, store.ErrCorrupt) {
				t.Fatal(err)
			}
			found := false
			for _, v := range vs {
				if v.Kind == c.kind && v.Bucket == c.bucket && bytes.Equal(v.Key, c.key) && strings.Contains(v.Detail, c.detail) {
					found = true
				}
			}
			if !found {
				t.Errorf("no %s violation at %s key %x mentioning %q; got:", c.kind, c.bucket, c.key, c.detail)
				for _, v := range vs {
					t.Logf("  %s", v)
				}
			}
			if c.api != nil {
				err := db.ViewRun("r1", func(r *store.RunTx) error {
					return c.api(r)
				})
				var ce *store.CorruptError
				if !errors.Is(err, store.ErrCorrupt) || !errors.As(err, &ce) || !strings.HasPrefix(ce.Bucket, run) {
					t.Errorf("API read of the damage: %v, want a *CorruptError under %s", err, run)
				}
			}
			db.Close()
			if after := fileDigest(t, path); after != before {
				t.Error("Check changed the damaged file")
			}
		})
	}
}

// TestTxCheckOnLatestSnapshot: in a read transaction on the latest commit
// with no write in progress, Tx.Check compares the meta pages as DB.Check
// does, on a writable and on a read-only DB; inside a write transaction
// (pages not on disk yet) it checks the records alone.
func TestTxCheckOnLatestSnapshot(t *testing.T) {
	orig := fixturePath("flipped-meta-page")
	for _, ro := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "meta.db")
		copyFile(t, orig, path)
		o := syncOptions()
		o.ReadOnly = ro
		db, err := store.Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		want, err := db.Check(nil)
		if err != nil && !errors.Is(err, store.ErrCorrupt) || len(want) == 0 {
			t.Fatalf("read-only %t: DB.Check of a flipped meta page: %v %v", ro, want, err)
		}
		var got []store.Violation
		if err := db.View(func(tx *store.Tx) error { got, _ = tx.Check(nil); return nil }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("read-only %t: Tx.Check in a view = %v, DB.Check = %v", ro, got, want)
		}
		if !ro {
			err := db.Update(func(tx *store.Tx) error {
				if vs, _ := tx.Check(nil); len(vs) != 0 {
					t.Errorf("Tx.Check in a write transaction: %v, want none (the meta pages are not its to compare)", vs)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
}

// TestTxCheckDuringAWrite: while a write transaction is open, a read
// transaction's Tx.Check cannot compare the meta pages (the write may be
// rewriting one), so it checks the records alone instead of waiting or
// reporting a half-written page.
func TestTxCheckDuringAWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	copyFile(t, fixturePath("flipped-meta-page"), path)
	db, err := store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var vs []store.Violation
	if err := db.View(func(tx *store.Tx) error { vs, _ = tx.Check(nil); return nil }); err != nil || len(vs) == 0 {
		t.Fatalf("Tx.Check before the write: %v %v, want the meta page reported", vs, err)
	}
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- db.Update(func(*store.Tx) error { close(started); <-release; return nil })
	}()
	<-started
	err = db.View(func(tx *store.Tx) error { vs, _ = tx.Check(nil); return nil })
	close(release)
	if uerr := <-done; err != nil || uerr != nil {
		t.Fatal(err, uerr)
	}
	if len(vs) != 0 {
		t.Errorf("Tx.Check during a write: %v, want no violations (the meta pages are skipped)", vs)
	}
}

// TestCheckFindsLeakedPage: a page neither reachable nor free (its id
// dropped from the freelist) is invisible to the page walk and to every
// record; only bbolt's own page accounting sees it, and Check reports it.
func TestCheckFindsLeakedPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leak.db")
	copyFile(t, goodFile(t), path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const header = 16 // bbolt's page header
	pageSize := int(binary.LittleEndian.Uint32(b[header+8:]))
	meta := func(i int) []byte { return b[i*pageSize+header:] }
	newer := meta(0)
	if binary.LittleEndian.Uint64(meta(1)[48:]) > binary.LittleEndian.Uint64(newer[48:]) {
		newer = meta(1)
	}
	fl := int(binary.LittleEndian.Uint64(newer[32:])) * pageSize
	count := binary.LittleEndian.Uint16(b[fl+10:])
	if count == 0 || count == 0xFFFF {
		t.Fatalf("fixture's freelist holds %d ids; want a few", count)
	}
	binary.LittleEndian.PutUint16(b[fl+10:], count-1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	leaked := func(vs []store.Violation) bool {
		return len(vs) == 1 && vs[0].Bucket == "(file)" && vs[0].Kind == "structure" && strings.Contains(vs[0].Detail, "unreachable unfreed")
	}
	o := syncOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, store.ErrCorrupt) || !leaked(vs) {
		t.Errorf("Check of a leaked page: %v %v; want one structure violation naming it", vs, err)
	}
	db.Close()
	// Inside a write transaction too, where the page walk is skipped.
	db, err = store.Open(path, syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *store.Tx) error { vs, _ = tx.Check(nil); return errRollback })
	if !errors.Is(err, errRollback) || !leaked(vs) {
		t.Errorf("Tx.Check in a write transaction: %v %v; want the leaked page", vs, err)
	}
}
