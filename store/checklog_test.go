package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// The log cross-check takes a record whose bytes are its last event's
// payload as matching that event without decoding it. A record put back
// as an earlier event wrote it, with a later change lost — the turns
// appended to a node (their event carries the turn count, not the node),
// a root added to a group (its event is the node's) — has those very
// bytes, and the log still says it is behind.
func TestCheckFindsARecordOneChangeBehindItsLog(t *testing.T) {
	var node, group uint64
	db := openWithGroup(t, func(r *RunTx, g uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: g})
		if err != nil {
			return err
		}
		node, group = n.ID, g
		return r.AppendTurns(n.ID, 0, model.Turn{Action: "a", Observation: "o"})
	})
	errRollBack := errors.New("roll back")
	for _, c := range []struct {
		name   string
		bucket string
		key    []byte
		kind   model.EventKind // the event whose payload the record goes back to
	}{
		{"a node without its turns", bNodes, u64key(node), model.EvNodeAdd},
		{"a group without its root", bGroups, u64key2(1, group), model.EvGroupOpen},
	} {
		t.Run(c.name, func(t *testing.T) {
			var vs []Violation
			err := db.Update(func(tx *Tx) error {
				r, err := tx.Run("r")
				if err != nil {
					return err
				}
				if vs, _ := tx.Check(nil); len(vs) > 0 {
					t.Fatalf("before the damage: %v", vs)
				}
				var payload []byte
				err = r.Events(1, func(e model.Event) error {
					if e.Kind == c.kind {
						payload = e.Payload
					}
					return nil
				})
				if err != nil || payload == nil {
					t.Fatalf("no %s event (%v)", c.kind, err)
				}
				b := r.subBucket(c.bucket)
				if bytes.Equal(b.Get(c.key)[headerLen:], payload) {
					t.Fatalf("fixture: the record is already the %s payload", c.kind)
				}
				if err := b.Put(c.key, frame(append(make([]byte, headerLen), payload...))); err != nil {
					return err
				}
				vs, _ = tx.Check(nil)
				return errRollBack
			})
			if err != errRollBack {
				t.Fatal(err)
			}
			for _, v := range vs {
				if strings.HasSuffix(v.Bucket, "/"+c.bucket) && bytes.Equal(v.Key, c.key) && strings.Contains(v.Detail, "differs from the event log") {
					return
				}
			}
			t.Errorf("violations %v do not say the record differs from the event log", vs)
		})
	}
}

// The whole-run check keeps recent nodes in nodeSlots slots by id; a run
// with more nodes than that shares every slot, and still checks clean.
func TestCheckOfARunLargerThanItsNodeCache(t *testing.T) {
	db := openWithGroup(t, func(r *RunTx, g uint64) error {
		root, err := r.AddNode(NodeSpec{Step: 1, Group: g})
		if err != nil {
			return err
		}
		for i := range 2*nodeSlots + 3 {
			if _, err := r.AddNode(NodeSpec{Step: 1, Group: g, Parent: root.ID, Ordinal: i}); err != nil {
				return err
			}
		}
		return nil
	})
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, ErrCorrupt) || len(vs) > 0 {
		t.Fatalf("check: %v %v", err, vs)
	}
}

// The whole-run check reads turns without copying them out (viewTurn),
// with decodeTurn's checks: a turn whose CRC holds but whose token array
// is not whole words is reported where it is.
func TestCheckFindsATurnWithBrokenTokens(t *testing.T) {
	var node uint64
	db := openWithGroup(t, func(r *RunTx, g uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: g})
		if err != nil {
			return err
		}
		node = n.ID
		return r.AppendTurns(n.ID, 0, model.Turn{Action: "a", ActionTokens: []uint32{1}, Observation: "o"})
	})
	var key []byte
	inRunR(t, db, true, func(r *RunTx) error {
		b := r.subBucket(bTurns)
		k, _ := b.Cursor().First()
		if k == nil || keyU64(k, 1) != node {
			t.Fatalf("fixture: first turn key %x", k)
		}
		key = cloneBytes(k)
		v := appendArrayLen(make([]byte, headerLen), turnFields)
		v = appendStr(v, "a")
		v = append(appendBinHeader(v, 5), 1, 0, 0, 0, 9) // a token and a byte
		v = appendBinHeader(v, 0)
		v = appendStr(v, "o")
		v = appendBinHeader(v, 0)
		v = appendUint64(appendBool(appendFloat64(v, 0), false), 1)
		return b.Put(key, frame(v))
	})
	vs, err := db.Check(nil)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	for _, v := range vs {
		if strings.HasSuffix(v.Bucket, "/turns") && bytes.Equal(v.Key, key) && v.Kind == "corrupt" && strings.Contains(v.Detail, "multiple of 4") {
			return
		}
	}
	t.Errorf("violations %v do not report the turn's token array", vs)
}
