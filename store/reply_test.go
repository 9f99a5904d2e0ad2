package store_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

func reply(key string, status int) store.Reply {
	return store.Reply{Key: key, Op: "POST /x", Fingerprint: []byte{1, 2}, Status: status, Body: []byte(`{"ok":` + fmt.Sprint(status) + `}`)}
}

func lookUp(tb testing.TB, db *store.DB, write bool, run, key string) (rep store.Reply, err error) {
	tb.Helper()
	do := func(tx *store.Tx) error {
		r, rerr := tx.Run(run)
		if rerr != nil {
			return rerr
		}
		rep, err = r.Reply(key)
		return nil
	}
	var txErr error
	if write {
		txErr = db.Update(do)
	} else {
		txErr = db.View(do)
	}
	if txErr != nil {
		tb.Fatal(txErr)
	}
	return rep, err
}

// A reply is found by its key, in its own transaction and after it, as it
// was put; a key is answered once; an unknown key is ErrNotFound; a key
// that is empty or too long is refused.
func TestPutReplyAndLookUp(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		if _, err := r.PutReply(reply("a", 201)); err != nil {
			return err
		}
		got, err := r.Reply("a")
		if err != nil || got.Status != 201 || string(got.Body) != `{"ok":201}` {
			t.Errorf("in its transaction: %+v %v", got, err)
		}
		return nil
	})
	got, err := lookUp(t, db, false, "r", "a")
	if err != nil || got.Key != "a" || got.Op != "POST /x" || string(got.Fingerprint) != "\x01\x02" || got.Status != 201 || string(got.Body) != `{"ok":201}` {
		t.Fatalf("after the commit: %+v %v", got, err)
	}
	if _, err := lookUp(t, db, false, "r", "b"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("an unknown key: %v, want ErrNotFound", err)
	}
	for key, want := range map[string]error{"a": model.ErrExists, "": model.ErrInvalid, strings.Repeat("k", store.MaxReplyKey+1): model.ErrInvalid} {
		err := db.UpdateRun("r", func(r *store.RunTx) error {
			var err error
			_, err = r.PutReply(reply(key, 200))
			return err
		})
		if !errors.Is(err, want) {
			t.Errorf("PutReply with a key of %d bytes: %v, want %v", len(key), err, want)
		}
	}
	mustCheck(t, db)
}

// A run written before the reply index (its replies only in the log, as
// the server kept them then) answers a read-only look-up by walking the
// log, and its first write transaction that looks a key up builds the
// index from the log, which then checks clean and answers every key.
func TestReplyIndexBuiltFromAnOlderLog(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		for i := range 5 {
			rep := reply(fmt.Sprintf("k%d", i), 200+i)
			if _, err := storetest.AppendRawEvent(r, model.EvReply, 0, 0, 0, 0, &rep); err != nil { // as an older server wrote them, through AppendEvent
				return err
			}
			if _, err := r.AppendEvent("other.kind", 1, 0, 0, 0, nil); err != nil {
				return err
			}
		}
		return storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r")).DeleteBucket([]byte("replies"))
	})
	mustCheck(t, db) // no index: nothing to hold the log to
	if got, err := lookUp(t, db, false, "r", "k3"); err != nil || got.Status != 203 {
		t.Fatalf("read-only look-up without the index: %+v %v", got, err)
	}
	if got, err := lookUp(t, db, true, "r", "k4"); err != nil || got.Status != 204 {
		t.Fatalf("first look-up of a writer: %+v %v", got, err)
	}
	view(t, db, func(tx *store.Tx) error {
		if storetest.BoltTx(tx).Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte("replies")) == nil {
			t.Error("the writer's look-up did not build the index")
		}
		return nil
	})
	mustCheck(t, db)
	for i := range 5 {
		if got, err := lookUp(t, db, false, "r", fmt.Sprintf("k%d", i)); err != nil || got.Status != 200+i {
			t.Errorf("key k%d through the index: %+v %v", i, got, err)
		}
	}
}

// Check holds the index and the log to each other: an entry that names
// another event, an entry whose event is gone, a reply event the index
// lacks — each is a violation at the index's key.
func TestCheckHoldsRepliesToTheLog(t *testing.T) {
	damage := map[string]struct {
		edit   func(idx *bolt.Bucket, events *bolt.Bucket) error
		detail string
	}{
		"entry names a non-reply event": {func(idx, _ *bolt.Bucket) error { return idx.Put([]byte("a"), beKey(1)) }, "a run.create event"},
		"entry names another key's reply": {func(idx, _ *bolt.Bucket) error {
			return idx.Put([]byte("a"), idx.Get([]byte("b")))
		}, "the reply to key"},
		"entry names a missing event": {func(idx, _ *bolt.Bucket) error { return idx.Put([]byte("a"), beKey(999)) }, "which is missing"},
		"entry is not a seq":          {func(idx, _ *bolt.Bucket) error { return idx.Put([]byte("a"), []byte{1}) }, "8-byte"},
		"reply missing from index":    {func(idx, _ *bolt.Bucket) error { return idx.Delete([]byte("b")) }, "the index does not name it"},
	}
	for name, d := range damage {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(filepath.Join(t.TempDir(), "patr.db"), storetest.Options())
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			update(t, db, func(tx *store.Tx) error {
				r, err := tx.CreateRun("r", nil, nil)
				if err != nil {
					return err
				}
				for _, k := range []string{"a", "b"} {
					if _, err := r.PutReply(reply(k, 200)); err != nil {
						return err
					}
				}
				return nil
			})
			mustCheck(t, db)
			if err = storetest.Bolt(db).Update(func(btx *bolt.Tx) error {
				run := btx.Bucket([]byte("runs")).Bucket([]byte("r"))
				return d.edit(run.Bucket([]byte("replies")), run.Bucket([]byte("events")))
			}); err != nil {
				t.Fatal(err)
			}
			vs, err := db.Check(nil)
			if err != nil && !errors.Is(err, store.ErrCorrupt) {
				t.Fatal(err)
			}
			found := false
			for _, v := range vs {
				if v.Bucket == "runs/r/replies" && strings.Contains(v.Detail, d.detail) {
					found = true
				}
			}
			if !found {
				t.Errorf("violations %v: want one at runs/r/replies mentioning %q", vs, d.detail)
			}
		})
	}
}

// Dropping old steps drops the replies logged up to the dropped step's
// checkpoint with their index entries; later replies stay, and the file
// checks clean.
func TestDropStepsDropsOldReplies(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		for step := uint64(1); step <= 3; step++ {
			if _, err := r.PutReply(reply(fmt.Sprintf("before-ckpt-%d", step), 200)); err != nil {
				return err
			}
			if err := r.PutCheckpoint(model.Checkpoint{Step: step, URI: "file:///w"}); err != nil {
				return err
			}
		}
		return nil
	})
	inRun(t, db, true, "r", func(r *store.RunTx) error { _, err := r.DropSteps(2); return err })
	mustCheck(t, db)
	for key, want := range map[string]error{"before-ckpt-1": model.ErrNotFound, "before-ckpt-2": model.ErrNotFound, "before-ckpt-3": nil} {
		if _, err := lookUp(t, db, false, "r", key); !errors.Is(err, want) && err != want {
			t.Errorf("%s after dropping through step 2: %v, want %v", key, err, want)
		}
	}
}
