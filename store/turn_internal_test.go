package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// An append that rewrites stored turns finds their keys through the
// node's turn ranges. When the record says more turns than its ranges
// hold, the append is refused as corrupt and writes nothing: rewriting
// from ranges that fall short would put the turns under the wrong keys.
func TestAppendRefusesTurnRangesShortOfTheRecord(t *testing.T) {
	turn := model.Turn{Action: "a", Observation: "o", ActionTokens: []uint32{1}, ActionLogprobs: []float32{-0.5}}
	var id uint64
	db := openWithGroup(t, func(r *RunTx, group uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: group})
		if err != nil {
			return err
		}
		id = n.ID
		return r.AppendTurns(id, 0, turn, turn, turn)
	})
	path := db.Path()
	// The record keeps its three turns; its ranges now hold one.
	inRunR(t, db, true, func(r *RunTx) error {
		n, err := r.Node(id)
		if err != nil {
			return err
		}
		if len(n.TurnRanges) != 1 || n.TurnRanges[0].Count != 3 {
			t.Fatalf("turn ranges after three appended turns: %+v", n.TurnRanges)
		}
		n.TurnRanges = model.TurnRanges{{Seq: n.TurnRanges[0].Seq, Count: 1}}
		nodes, err := r.bucket(bNodes)
		if err != nil {
			return err
		}
		return nodes.Put(u64key(id), encodeNode(&n))
	})
	if err := db.Close(); err != nil { // the node cache still holds the record as written before
		t.Fatal(err)
	}
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	turns := func() (kvs [][]byte) {
		inRunR(t, db, false, func(r *RunTx) error {
			b, err := r.bucket(bTurns)
			if err != nil {
				return err
			}
			return b.ForEach(func(k, v []byte) error {
				kvs = append(kvs, bytes.Clone(k), bytes.Clone(v))
				return nil
			})
		})
		return kvs
	}
	before := turns()
	other := turn
	other.Action = "b"
	err = db.Update(func(tx *Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		return r.AppendTurns(id, 1, other)
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("rewriting turn 1 of a record whose ranges hold 1 turn of 3: %v, want ErrCorrupt", err)
	}
	if after := turns(); len(after) != len(before) || !bytes.Equal(bytes.Join(after, nil), bytes.Join(before, nil)) {
		t.Error("the refused append changed the turns")
	}
}
