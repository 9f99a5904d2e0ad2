package store_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
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
		return r.Score(ids[0], model.Score{Value: 0.5, Turn: 1})
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

// A commit that fails (here the file reaches MaxSize) after the cache
// marked the nodes it wrote pending leaves the cached versions, which are
// still the file's: a later read gets the node as it was, from the cache,
// and the same as a fresh process decodes from the file.
func TestCacheAfterAFailedCommit(t *testing.T) {
	path := tempPath(t, "capped.db")
	o := storetest.Options()
	o.MaxSize = 2 << 20
	db := storetest.OpenPath(t, path, o)
	var id uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		id = n.ID
		if err != nil {
			return err
		}
		return r.AppendTurns(id, 0, textTurns("t", 2)...)
	})
	read := func(db *store.DB) (n model.Node) {
		inRun(t, db, false, "r", func(r *store.RunTx) (err error) { n, err = r.Node(id); return })
		return n
	}
	want := read(db) // and cached
	big := textTurns("big", 300)
	for i := range big {
		big[i].Observation = strings.Repeat("o", 10_000)
	}
	err := db.UpdateRun("r", func(r *store.RunTx) error {
		if err := r.Score(id, model.Score{Value: 1, Turn: 2}); err != nil {
			return err
		}
		return r.AppendTurns(id, 2, big...)
	})
	if !errors.Is(err, store.ErrFull) {
		t.Fatalf("a 3 MB commit into a 2 MiB file: %v, want ErrFull", err)
	}
	before := db.CacheStats()
	got := read(db)
	if hits := db.CacheStats().Hits - before.Hits; hits != 1 {
		t.Errorf("reading the node after the failed commit: %d cache hits, want 1", hits)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the failed commit the node reads\n%+v\nwant\n%+v", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fresh := storetest.OpenPath(t, path, storetest.Options())
	if got := read(fresh); !reflect.DeepEqual(got, want) {
		t.Errorf("a fresh process reads\n%+v\nwant\n%+v", got, want)
	}
}
