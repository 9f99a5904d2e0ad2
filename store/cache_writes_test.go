package store_test

import (
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The versions a commit wrote go into the node cache once it has
// finished: the next transaction, which continues the branches this one
// wrote, reads them without decoding, and gets exactly what was written.
// A copy AddNode returned does not reach the cached version.
func TestCacheHoldsCommittedWrites(t *testing.T) {
	db := storetest.Open(t)
	var ids []uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		ids = append(ids, n.ID)
		for o := 1; o < 4; o++ {
			n, err := r.AddNode(store.NodeSpec{Step: 1, Group: n.Group, Ordinal: o, EnvState: []byte("env")})
			if err != nil {
				return err
			}
			n.EnvState[0] = 'X' // the caller's copy
			ids = append(ids, n.ID)
		}
		return nil
	})
	inRun(t, db, true, "r", func(r *store.RunTx) error {
		for i, id := range ids {
			if err := r.AppendTurns(id, 0, textTurns("t", i+1)...); err != nil {
				return err
			}
		}
		return r.Score(ids[0], store.Score{Value: 0.5, Turn: 1})
	})
	before := db.CacheStats()
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		for i, id := range ids {
			n, err := r.Node(id)
			if err != nil {
				return err
			}
			if n.Turns != i+1 || (i > 0 && string(n.EnvState) != "env") || (i == 0 && len(n.Scores) != 1) {
				t.Errorf("node %d: %d turns, env state %q, scores %v; want %d turns, env, one score on the first", id, n.Turns, n.EnvState, n.Scores, i+1)
			}
		}
		return nil
	})
	after := db.CacheStats()
	if hits, misses := after.Hits-before.Hits, after.Misses-before.Misses; hits != uint64(len(ids)) || misses != 0 {
		t.Errorf("reading the %d nodes the last commit wrote: %d hits, %d misses; want %d hits", len(ids), hits, misses, len(ids))
	}
}
