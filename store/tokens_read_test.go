package store_test

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// ViewTurns hands out exactly the token arrays Turns decodes, packed
// little-endian, with the reward, done flag and policy version.
func TestViewTurns(t *testing.T) {
	db := storetest.Open(t)
	turns := []store.Turn{
		{Action: "a", ActionTokens: []uint32{1, 2, 1 << 31}, ActionLogprobs: []float32{-1, -0.5, 0}, Observation: "o",
			ObservationTokens: []uint32{9}, Reward: 0.5, PolicyVersion: 7},
		{Action: "b", ObservationTokens: []uint32{3, 4}, Done: true},
	}
	err := db.Update(func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		return r.AppendTurns(n.ID, 0, turns...)
	})
	if err != nil {
		t.Fatal(err)
	}
	u32 := func(b []byte) []uint32 {
		out := make([]uint32, len(b)/4)
		for i := range out {
			out[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
		return out
	}
	err = db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("r")
		seen := 0
		err := r.ViewTurns(1, 2, func(i int, v *store.TurnView) error {
			want := turns[i]
			lps := u32(v.ActionLogprobs)
			if !slices.Equal(u32(v.ActionTokens), want.ActionTokens) || !slices.Equal(u32(v.ObservationTokens), want.ObservationTokens) ||
				len(lps) != len(want.ActionLogprobs) || v.Reward != want.Reward || v.Done != want.Done || v.PolicyVersion != want.PolicyVersion {
				t.Errorf("turn %d: view %+v, want %+v", i, v, want)
			}
			for j, lp := range lps {
				if math.Float32frombits(lp) != want.ActionLogprobs[j] {
					t.Errorf("turn %d logprob %d", i, j)
				}
			}
			seen++
			return nil
		})
		if err != nil || seen != 2 {
			t.Fatalf("ViewTurns: %v after %d turns", err, seen)
		}
		if err := r.ViewTurns(1, 3, func(int, *store.TurnView) error { return nil }); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("a turn past the stored ones: %v", err)
		}
		stop := errors.New("stop")
		if err := r.ViewTurns(1, 2, func(int, *store.TurnView) error { return stop }); err != stop {
			t.Errorf("fn's error: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
