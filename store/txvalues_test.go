package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// The value chunks of a write transaction go to the next one: a commit's
// chunks are taken again, not allocated again, and what the earlier
// transactions stored — committed, or rolled back — reads back as it was
// written after later ones have reused its chunks.
func TestValueChunksHandedOnIntact(t *testing.T) {
	var node uint64
	db := openWithGroup(t, func(r *RunTx, group uint64) error {
		n, err := r.AddNode(NodeSpec{Step: 1, Group: group})
		node = n.ID
		return err
	})
	turnsOf := func(label string) []model.Turn {
		out := make([]model.Turn, 64) // ~128 KB of values: several full-size chunks
		for i := range out {
			out[i] = model.Turn{Action: fmt.Sprintf("%s %d %s", label, i, strings.Repeat(label, 2000/len(label)))}
		}
		return out
	}
	appendAll := func(from int, label string) {
		inRunR(t, db, true, func(r *RunTx) error { return r.AppendTurns(node, from, turnsOf(label)...) })
	}

	appendAll(0, "first")
	if len(db.spare) < 3 {
		t.Fatalf("%d spare chunks after a commit of ~128 KB of values, want at least 3", len(db.spare))
	}
	// The first commit also filled smaller chunks, which are not kept; from
	// the second on, a commit of the same size takes as many as it gives.
	appendAll(64, "second")
	spares := len(db.spare)
	// A transaction that writes and then fails hands its chunks on too.
	boom := errors.New("boom")
	err := db.Update(func(tx *Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		if err := r.AppendTurns(node, 128, turnsOf("rolled back")...); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v, want boom", err)
	}
	appendAll(128, "third")
	if len(db.spare) != spares {
		t.Errorf("%d spare chunks after the third commit, %d after the second: they were not reused", len(db.spare), spares)
	}

	inRunR(t, db, false, func(r *RunTx) error {
		got, err := r.Turns(node)
		if err != nil {
			return err
		}
		if len(got) != 192 {
			t.Fatalf("%d turns, want 192", len(got))
		}
		for i, label := range []string{"first", "second", "third"} {
			want := turnsOf(label)
			for j := range want {
				if got[64*i+j].Action != want[j].Action {
					t.Fatalf("turn %d reads %.20q..., was written %.20q...", 64*i+j, got[64*i+j].Action, want[j].Action)
				}
			}
		}
		return nil
	})
	if vs, err := db.Check(nil); err != nil || len(vs) > 0 {
		t.Fatalf("check: %v %v", vs, err)
	}
}
