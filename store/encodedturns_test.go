package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// boltContents lists every key and value of the file, nested buckets
// included, by path: two files with the same contents in different page
// layouts compare equal.
func boltContents(tb testing.TB, db *store.DB) map[string]string {
	tb.Helper()
	out := map[string]string{}
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		out[prefix+"#seq"] = fmt.Sprint(b.Sequence())
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+"/"+string(k), b.Bucket(k))
			}
			out[fmt.Sprintf("%s/%x", prefix, k)] = string(v)
			return nil
		})
	}
	err := storetest.Bolt(db).View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestAppendEncodedTurns: turns encoded outside the transaction are stored
// exactly as AppendTurns stores them — turn values, node records, events —
// including a rewrite after a crash, one EncodedTurns appended to two
// nodes, and an empty one (nothing written, no event).
func TestAppendEncodedTurns(t *testing.T) {
	type appender func(r *store.RunTx, id uint64, from int, turns ...model.Turn) error
	build := func(name string, appendTurns appender) *store.DB {
		db := storetest.OpenPath(t, filepath.Join(t.TempDir(), name), storetest.Options())
		update(t, db, func(tx *store.Tx) error {
			r, err := tx.CreateRun("r", nil, nil)
			if err != nil {
				return err
			}
			g, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "t"})
			if err != nil {
				return err
			}
			a, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID})
			if err != nil {
				return err
			}
			b, err := r.AddNode(store.NodeSpec{Step: 1, Group: g.ID, Ordinal: 1})
			if err != nil {
				return err
			}
			for _, call := range []struct {
				id    uint64
				from  int
				turns []model.Turn
			}{
				{a.ID, 0, textTurns("a", 3)},
				{a.ID, 1, textTurns("again", 2)}, // rewrite, as after a crash
				{b.ID, 0, textTurns("a", 3)},
				{b.ID, 3, nil},
				{a.ID, 3, []model.Turn{{}, {Action: "x", ActionTokens: []uint32{}}}},
			} {
				if err := appendTurns(r, call.id, call.from, call.turns...); err != nil {
					return err
				}
			}
			return nil
		})
		return db
	}
	plain := build("plain.db", func(r *store.RunTx, id uint64, from int, turns ...model.Turn) error {
		return r.AppendTurns(id, from, turns...)
	})
	var reused store.EncodedTurns
	encoded := build("encoded.db", func(r *store.RunTx, id uint64, from int, turns ...model.Turn) error {
		enc, err := store.EncodeTurns(turns...)
		if err != nil {
			return err
		}
		if enc.Len() != len(turns) {
			t.Errorf("EncodeTurns of %d turns holds %d", len(turns), enc.Len())
		}
		if reused.Len() == 3 && from == 0 {
			enc = reused // node b gets the very values node a got
		}
		if reused.Len() == 0 {
			reused = enc
		}
		return r.AppendEncodedTurns(id, from, enc)
	})
	want, got := boltContents(t, plain), boltContents(t, encoded)
	if len(want) != len(got) {
		t.Fatalf("AppendEncodedTurns wrote %d keys, AppendTurns %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s differs: %x, AppendTurns wrote %x", k, got[k], v)
		}
	}
	inRun(t, encoded, false, "r", func(r *store.RunTx) error {
		turns, err := r.Turns(1)
		if err != nil {
			return err
		}
		if len(turns) != 5 || turns[1].Action != "act again0" || turns[4].Action != "x" {
			t.Errorf("node 1's turns read back as %+v", turns)
		}
		return nil
	})
}

// TestEncodeTurnsValidates: encoding ahead applies AppendTurns' rule, so
// a bad turn is refused before it is ever near a transaction.
func TestEncodeTurnsValidates(t *testing.T) {
	bad := map[string]func(*model.Turn){
		"reward NaN":          func(t *model.Turn) { t.Reward = math.NaN() },
		"reward +Inf":         func(t *model.Turn) { t.Reward = math.Inf(1) },
		"reward -Inf":         func(t *model.Turn) { t.Reward = math.Inf(-1) },
		"action not UTF-8":    func(t *model.Turn) { t.Action = "\xff" },
		"observation invalid": func(t *model.Turn) { t.Observation = "\xed\xa0\x80" },
		"logprob count":       func(t *model.Turn) { t.ActionLogprobs = t.ActionLogprobs[:2] },
		"logprob positive":    func(t *model.Turn) { t.ActionLogprobs[0] = 1e-3 },
		"logprob NaN":         func(t *model.Turn) { t.ActionLogprobs[0] = float32(math.NaN()) },
	}
	for name, mutate := range bad {
		tn := textTurn("bad")
		mutate(&tn)
		enc, err := store.EncodeTurns(textTurn("fine"), tn)
		if !errors.Is(err, model.ErrInvalid) || enc.Len() != 0 {
			t.Errorf("%s: %v, %d turns; want ErrInvalid and none", name, err, enc.Len())
		}
	}
	// No logprobs at all is allowed: not every policy reports them.
	ok := textTurn("ok")
	ok.ActionLogprobs = nil
	if _, err := store.EncodeTurns(ok); err != nil {
		t.Errorf("a turn without logprobs: %v", err)
	}
	// A zero EncodedTurns is an empty append: no error, no event.
	db := storetest.Open(t)
	var key []byte
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		seq := r.LastSeq()
		if err := r.AppendEncodedTurns(n.ID, 0, store.EncodedTurns{}); err != nil {
			return err
		}
		if r.LastSeq() != seq {
			t.Error("an empty append logged an event")
		}
		// The bytes EncodeTurns makes are EncodeTurn's.
		enc, err := store.EncodeTurns(textTurn("one"))
		if err != nil {
			return err
		}
		if err := r.AppendEncodedTurns(n.ID, 0, enc); err != nil {
			return err
		}
		key, err = store.TurnKey(r, n.ID, 0)
		return err
	})
	one := textTurn("one")
	want, _ := store.EncodeTurn(&one)
	view(t, db, func(tx *store.Tx) error {
		if got := rawBucket(t, tx, "r", "turns").Get(key); !bytes.Equal(got, want) {
			t.Errorf("stored %x, EncodeTurn gives %x", got, want)
		}
		return nil
	})
}

func u64(x uint64) []byte {
	return []byte{byte(x >> 56), byte(x >> 48), byte(x >> 40), byte(x >> 32), byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}
}
