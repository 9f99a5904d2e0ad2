package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// TestPathBackward: the brief walk gives the trajectory's actions, rewards
// and done flags in reverse, stops when asked, and reports a damaged turn
// as ErrCorrupt.
func TestPathBackward(t *testing.T) {
	db := storetest.Open(t)
	f := buildFixture(t, db)
	inRun(t, db, false, f.Run, func(r *store.RunTx) error {
		full, err := r.Trajectory(f.B)
		if err != nil {
			return err
		}
		var got []store.TurnBrief
		if err := r.PathBackward(f.B, func(b store.TurnBrief) bool { got = append(got, b); return true }); err != nil {
			return err
		}
		if len(got) != len(full) || len(full) < 3 {
			t.Fatalf("%d briefs for a path of %d turns", len(got), len(full))
		}
		for i, b := range got {
			want := full[len(full)-1-i]
			if b.Action != want.Action || b.Reward != want.Reward || b.Done != want.Done {
				t.Errorf("brief %d = %+v, want the turn %+v", i, b, want.Turn)
			}
		}
		n := 0
		if err := r.PathBackward(f.B, func(store.TurnBrief) bool { n++; return n < 2 }); err != nil || n != 2 {
			t.Errorf("stopping after 2: %d turns, %v", n, err)
		}
		return nil
	})
	k := turnKeyOf(t, db, f.Run, f.A, 0)
	var orig []byte
	update(t, db, func(tx *store.Tx) error {
		b := rawBucket(t, tx, f.Run, "turns")
		orig = append([]byte(nil), b.Get(k)...)
		v := append([]byte(nil), orig...)
		v[len(v)-3] ^= 0x10
		return b.Put(k, v)
	})
	// Put back, so the file checks clean when the test ends.
	defer update(t, db, func(tx *store.Tx) error { return rawBucket(t, tx, f.Run, "turns").Put(k, orig) })
	inRun(t, db, false, f.Run, func(r *store.RunTx) error {
		err := r.PathBackward(f.B, func(store.TurnBrief) bool { return true })
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("a damaged inherited turn: %v, want ErrCorrupt", err)
		}
		return nil
	})
}
