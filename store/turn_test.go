package store_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
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

// A node's turns are read with one cursor seek per range of its turns; the
// cursor then stands on whatever key follows. When the node's own turns
// are missing, that key belongs to another node's turn (or is malformed,
// or there is none), and the read must be ErrCorrupt, never the other
// node's turns.

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

// The policy versions a node's turns were generated with: MinVersion and
// MaxVersion span every version a writer gave, across appends, so a
// trainer can tell which turns came from a stale policy.

func TestTurnVersionsSpanEveryAppend(t *testing.T) {
	db := storetest.Open(t)
	turn := func(version uint64) model.Turn {
		tn := textTurn("v")
		tn.PolicyVersion = version
		return tn
	}
	var id uint64
	update(t, db, func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		id = n.ID
		if err != nil {
			return err
		}
		// 0 means the writer did not say, and leaves the span alone.
		for i, v := range []uint64{0, 1, 5, 0, 3} {
			if err := r.AppendTurns(id, i, turn(v)); err != nil {
				return err
			}
		}
		// Several turns in one call span all of theirs, the greatest
		// not first; a later, older version leaves the greatest.
		if err := r.AppendTurns(id, 5, turn(4), turn(0), turn(9), turn(6)); err != nil {
			return err
		}
		return r.AppendTurns(id, 9, turn(2))
	})
	inRun(t, db, false, "r", func(r *store.RunTx) error {
		n, err := r.Node(id)
		if err != nil {
			return err
		}
		if n.MinVersion != 1 || n.MaxVersion != 9 || n.Turns != 10 {
			t.Errorf("after versions 0, 1, 5, 0, 3, then 4, 0, 9, 6 in one call, then 2: MinVersion %d, MaxVersion %d, %d turns; want 1, 9, 10",
				n.MinVersion, n.MaxVersion, n.Turns)
		}
		return nil
	})
}

// A node with no turns reads as an empty list without touching the turns
// bucket: a run whose turns bucket is gone still lists its turnless nodes
// (Check reports the missing bucket), while a node with turns reads as
// corrupt.
func TestTurnlessNodeReadsWithoutTurnsBucket(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	err := db.Update(func(tx *store.Tx) error {
		if err := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r1")).DeleteBucket([]byte("turns")); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		if ts, err := r.Turns(f.F); err != nil || len(ts) != 0 {
			t.Errorf("Turns of a node with no turns: %v, %v; want none, no error", ts, err)
		}
		if _, err := r.Turns(f.X); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Turns of a node with a turn: %v, want ErrCorrupt", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}

// The turn API's refusals: writes outside a write transaction, reads of
// nodes or turns that do not exist, and empty appends that write nothing.

func TestTurnRefusals(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	enc, err := store.EncodeTurns(textTurn("x"))
	if err != nil {
		t.Fatal(err)
	}
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		if err := r.AppendEncodedTurns(f.X, 1, enc); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("AppendEncodedTurns in a read transaction: %v, want ErrReadOnly", err)
		}
		if err := r.AppendTurns(f.X, 1, textTurn("x")); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("AppendTurns in a read transaction: %v, want ErrReadOnly", err)
		}
		if _, err := r.Turns(31337); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Turns of an unknown node: %v, want ErrNotFound", err)
		}
		if _, err := r.Turn(31337, 0); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("Turn of an unknown node: %v, want ErrNotFound", err)
		}
		for _, idx := range []int{-1, 1} {
			if _, err := r.Turn(f.X, idx); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("Turn(%d) of a node with 1 turn: %v, want ErrNotFound", idx, err)
			}
		}
		if tn, err := r.Turn(f.X, 0); err != nil || tn.Action != "act x0" {
			t.Errorf("Turn(0): %+v, %v", tn, err)
		}
		return nil
	})
	last := dumpRun(t, db, "r1").LastSeq
	inRun(t, db, true, "r1", func(r *store.RunTx) error {
		if err := r.AppendTurns(f.X, 1); err != nil {
			return err
		}
		return r.AppendEncodedTurns(f.X, 1, store.EncodedTurns{})
	})
	if d := dumpRun(t, db, "r1"); d.LastSeq != last || len(d.Turns[f.X]) != 1 {
		t.Errorf("empty appends wrote events (%d → %d) or turns (%d)", last, d.LastSeq, len(d.Turns[f.X]))
	}
}

// TestTurnsWithoutTurnsBucket: a run whose turns bucket is gone reads as
// corrupt, for one turn and for all of a node's, and refuses appends.
func TestTurnsWithoutTurnsBucket(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	err := db.Update(func(tx *store.Tx) error {
		if err := storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r1")).DeleteBucket([]byte("turns")); err != nil {
			t.Fatal(err)
		}
		r, err := tx.Run("r1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Turn(f.X, 0); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Turn without a turns bucket: %v, want ErrCorrupt", err)
		}
		if _, err := r.Turns(f.X); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("Turns without a turns bucket: %v, want ErrCorrupt", err)
		}
		if err := r.AppendTurns(f.X, 1, textTurn("x1")); !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("AppendTurns without a turns bucket: %v, want ErrCorrupt", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}

// A refused append names the turn by its index in the node, from where the
// call began, not by its place in the call.
func TestAppendTurnsNamesTheRefusedTurn(t *testing.T) {
	db := storetest.Open(t)
	err := db.Update(func(tx *store.Tx) error {
		r, n, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		if err := r.AppendTurns(n.ID, 0, textTurn("a"), textTurn("b")); err != nil {
			return err
		}
		bad := textTurn("d")
		bad.Observation = "\xff"
		return r.AppendTurns(n.ID, 2, textTurn("c"), bad)
	})
	if !errors.Is(err, model.ErrInvalid) || !strings.Contains(err.Error(), "turn 3 of node") {
		t.Fatalf("append of a bad turn at index 3: %v, want ErrInvalid naming turn 3", err)
	}
}

// encodeTurn promises one allocation of exactly the value's size: the
// size formula must agree with the encoder at every msgpack header width
// (fixstr/str8/str16/str32, bin8/bin16/bin32).

func TestEncodeTurnExactSize(t *testing.T) {
	strLens := []int{0, 31, 32, 255, 256, 65535, 65536}
	tokLens := []int{0, 1, 63, 64, 16383, 16384} // 4 bytes each: bin8 up to 255 bytes, bin16 up to 65535
	for i, sl := range strLens {
		for j, tl := range tokLens {
			toks := make([]uint32, tl)
			lps := make([]float32, tokLens[(j+1)%len(tokLens)])
			obs := make([]uint32, tokLens[(j+2)%len(tokLens)])
			turn := model.Turn{
				Action:            strings.Repeat("a", sl),
				ActionTokens:      toks,
				ActionLogprobs:    lps,
				Observation:       strings.Repeat("o", strLens[(i+1)%len(strLens)]),
				ObservationTokens: obs,
				Reward:            0.5,
				Done:              true,
			}
			v, err := store.EncodeTurn(&turn)
			if err != nil {
				t.Fatal(err)
			}
			if cap(v) != len(v) {
				t.Errorf("action %d bytes, %d tokens: value of %d bytes in %d of capacity", sl, tl, len(v), cap(v))
			}
			got, err := store.DecodeTurn(v)
			if err != nil {
				t.Fatalf("action %d bytes, %d tokens: %v", sl, tl, err)
			}
			for _, s := range []*model.TokenIDs{&turn.ActionTokens, &turn.ObservationTokens} {
				if len(*s) == 0 {
					*s = nil
				}
			}
			if len(turn.ActionLogprobs) == 0 {
				turn.ActionLogprobs = nil
			}
			if !reflect.DeepEqual(got, turn) {
				t.Errorf("action %d bytes, %d tokens: round trip differs", sl, tl)
			}
		}
	}
}

// ViewTurns takes its segments from the caller: one naming a node the run
// does not have is ErrNotFound, not a crash or an empty view.
func TestViewTurnsOfUnknownNode(t *testing.T) {
	db := storetest.OpenPath(t, goodFile(t), syncOptions())
	f := readFixture(t, db)
	inRun(t, db, false, "r1", func(r *store.RunTx) error {
		vs, err := r.ViewTurns([]model.Segment{{Node: f.X, Count: 1}, {Node: 31337, Count: 1}})
		if !errors.Is(err, model.ErrNotFound) || vs != nil {
			t.Errorf("ViewTurns with an unknown node: %d views, %v; want ErrNotFound", len(vs), err)
		}
		return nil
	})
}
