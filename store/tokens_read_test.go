package store_test

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// ViewTurns hands out exactly the token arrays Turns decodes, packed
// little-endian, with the reward, done flag and policy version.
func TestViewTurns(t *testing.T) {
	// Not storetest.Open: the test damages the file, whose check at close
	// would fail.
	db, err := store.Open(filepath.Join(t.TempDir(), "v.db"), storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	turns := []model.Turn{
		{Action: "a", ActionTokens: []uint32{1, 2, store.MaxTokenID}, ActionLogprobs: []float32{-1, -0.5, 0}, Observation: "o",
			ObservationTokens: []uint32{9}, Reward: 0.5, PolicyVersion: 7},
		{Action: "b", ObservationTokens: []uint32{3, 4}, Done: true},
	}
	err = db.Update(func(tx *store.Tx) error {
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
		views, err := r.ViewTurns([]model.Segment{{Node: 1, Count: 2}, {Node: 1, Count: 1}})
		if err != nil || len(views) != 3 {
			t.Fatalf("ViewTurns: %d views, %v", len(views), err)
		}
		for i, v := range views {
			want := turns[i%2]
			lps := u32(v.ActionLogprobs)
			if !slices.Equal(u32(v.ActionTokens), want.ActionTokens) || !slices.Equal(u32(v.ObservationTokens), want.ObservationTokens) ||
				len(lps) != len(want.ActionLogprobs) || v.Reward != want.Reward || v.Done != want.Done || v.PolicyVersion != want.PolicyVersion {
				t.Errorf("view %d: %+v, want %+v", i, v, want)
			}
			for j, lp := range lps {
				if math.Float32frombits(lp) != want.ActionLogprobs[j] {
					t.Errorf("view %d logprob %d", i, j)
				}
			}
		}
		if _, err := r.ViewTurns([]model.Segment{{Node: 1, Count: 3}}); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("a turn past the stored ones: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Checked on several goroutines, a damaged value is still found.
	defer store.SetParallelCheckMin(1)()
	err = storetest.Bolt(db).Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte("turns"))
		k, v := b.Cursor().Last()
		v = slices.Clone(v)
		v[len(v)-2] ^= 0x40
		return b.Put(slices.Clone(k), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		r, _ := tx.Run("r")
		if views, err := r.ViewTurns([]model.Segment{{Node: 1, Count: 1}, {Node: 1, Count: 2}}); !errors.Is(err, store.ErrCorrupt) || views != nil {
			t.Errorf("damaged second turn: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
