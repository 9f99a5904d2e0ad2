package store_test

// A node's turns are read with one cursor seek per range of its turns; the
// cursor then stands on whatever key follows. When the node's own turns
// are missing, that key belongs to another node's turn (or is malformed,
// or there is none), and the read must be ErrCorrupt, never the other
// node's turns.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

func TestReadTurnsMissing(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	key := map[[2]uint64][]byte{}
	for _, n := range []struct {
		id    uint64
		turns int
	}{{f.A, 3}, {f.X, 1}} {
		for i := range n.turns {
			key[[2]uint64{n.id, uint64(i)}] = turnKeyOf(t, db, "r1", n.id, i)
		}
	}
	k2 := func(id, i uint64) []byte { return key[[2]uint64{id, i}] }
	k3 := func(id, i, extra uint64) []byte { return binary.BigEndian.AppendUint64(bytes.Clone(k2(id, i)), extra) }
	del := func(keys ...[]byte) func(*bolt.Bucket) error {
		return func(b *bolt.Bucket) error {
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}
	}
	cases := []struct {
		name    string
		node    uint64
		damage  func(*bolt.Bucket) error
		missing []byte // the key the error names
		reason  string // "" for "turn missing"
	}{
		// A's turns 0..2 are followed by other nodes' turns.
		{"first turn missing", f.A, del(k2(f.A, 0)), k2(f.A, 0), ""},
		{"middle turn missing", f.A, del(k2(f.A, 1)), k2(f.A, 1), ""},
		{"all turns missing, the next node's follow", f.A, del(k2(f.A, 0), k2(f.A, 1), k2(f.A, 2)), k2(f.A, 0), ""},
		{"last turns missing, the next node's follow", f.A, del(k2(f.A, 1), k2(f.A, 2)), k2(f.A, 1), ""},
		// X has the largest id: nothing follows its turns.
		{"only turn of the last node missing", f.X, del(k2(f.X, 0)), k2(f.X, 0), ""},
		// A 24-byte key right where X's turn 0 should be, holding a valid
		// turn: its first 16 bytes read as X's turn 0's key.
		{"malformed key in the turn's place", f.X, func(b *bolt.Bucket) error {
			v := append([]byte(nil), b.Get(k2(f.X, 0))...)
			if err := b.Delete(k2(f.X, 0)); err != nil {
				return err
			}
			return b.Put(k3(f.X, 0, 0), v)
		}, k2(f.X, 0), ""},
		// Present but damaged: the damage, not the next turn.
		{"middle turn damaged", f.A, func(b *bolt.Bucket) error {
			v := append([]byte(nil), b.Get(k2(f.A, 1))...)
			v[len(v)-1] ^= 0x40
			return b.Put(k2(f.A, 1), v)
		}, k2(f.A, 1), "CRC32C mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := db.Update(func(tx *store.Tx) error {
				if err := c.damage(rawBucket(t, tx, "r1", "turns")); err != nil {
					t.Fatal(err)
				}
				r, err := tx.Run("r1")
				if err != nil {
					t.Fatal(err)
				}
				turns, err := r.Turns(c.node)
				reason := c.reason
				if reason == "" {
					reason = "turn missing"
				}
				var ce *store.CorruptError
				if !errors.Is(err, store.ErrCorrupt) || !errors.As(err, &ce) || ce.Bucket != "runs/r1/turns" || string(ce.Key) != string(c.missing) || ce.Reason != reason {
					t.Errorf("Turns(%d) = %d turns, %v; want ErrCorrupt naming turns key %x", c.node, len(turns), err, c.missing)
				}
				if _, err := r.Trajectory(c.node); !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("Trajectory(%d): %v, want ErrCorrupt", c.node, err)
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
		})
	}
}
