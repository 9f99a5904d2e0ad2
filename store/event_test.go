package store_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// An event payload msgpack cannot encode is the caller's mistake: refused
// as invalid, with no sequence number, and nothing appended.
func TestAppendEventRefusesUnencodablePayload(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		_, _, err := runWithRoot(tx)
		return err
	})
	before := dumpRun(t, db, "r").LastSeq
	err := db.UpdateRun("r", func(r *store.RunTx) error {
		seq, err := r.AppendEvent("note", 1, 0, 0, 0, make(chan int))
		if seq != 0 || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("AppendEvent with a channel payload: %d, %v; want 0, ErrInvalid", seq, err)
		}
		return err
	})
	if !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("the write: %v, want ErrInvalid", err)
	}
	if after := dumpRun(t, db, "r").LastSeq; after != before {
		t.Errorf("events went from %d to %d", before, after)
	}
}

// The payloads RunTx.Events hands out outlive the transaction, hold what
// was written, and are separate copies: appending to one does not reach
// the next, though successive payloads share allocations. A nil payload
// stays nil, and one larger than an eighth of a chunk reads whole too.
func TestEventPayloadsOutliveTheTransaction(t *testing.T) {
	db := storetest.Open(t)
	big := make([]byte, 20<<10)
	for i := range big {
		big[i] = byte(i)
	}
	update(t, db, func(tx *store.Tx) error {
		r, _, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		for i := range 300 { // some 150 bytes each: several chunks
			note := append([]int{i, i * i}, make([]int, 50)...)
			for j := range 50 {
				note[2+j] = 1000 + j
			}
			if _, err := r.AppendEvent("note", 1, 0, uint64(i), 0, note); err != nil {
				return err
			}
		}
		if _, err := r.AppendEvent("none", 1, 0, 0, 0, nil); err != nil {
			return err
		}
		_, err = r.AppendEvent("big", 1, 0, 0, 0, big)
		return err
	})
	var events []model.Event
	if err := db.ViewRun("r", func(r *store.RunTx) error {
		return r.Events(0, func(e model.Event) error { events = append(events, e); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	var notes []model.Event
	for _, e := range events {
		switch e.Kind {
		case "note":
			notes = append(notes, e)
		case "none":
			if e.Payload != nil {
				t.Errorf("an event written without a payload reads %x", e.Payload)
			}
		case "big":
			var got []byte
			if err := store.DecodePayload(e, &got); err != nil || string(got) != string(big) {
				t.Errorf("the 20 KiB payload reads back as %d bytes (%v)", len(got), err)
			}
		}
	}
	if len(notes) != 300 {
		t.Fatalf("%d note events, want 300", len(notes))
	}
	for i := range notes[:len(notes)-1] {
		_ = append(notes[i].Payload, 0xff, 0xff, 0xff, 0xff)
	}
	for i, e := range notes {
		var got []int
		if err := store.DecodePayload(e, &got); err != nil || len(got) != 52 || got[0] != i || got[1] != i*i || got[51] != 1049 {
			t.Fatalf("note %d: payload %x decodes to %v (%v)", i, e.Payload, got, err)
		}
	}
}

// An event whose value fails its CRC stops a replay with ErrCorrupt naming
// its key and the CRC, after handing out the events before it and none
// after.
func TestEventsStopAtADamagedEvent(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "patr.db"), storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	update(t, db, func(tx *store.Tx) error {
		r, _, err := runWithRoot(tx)
		if err != nil {
			return err
		}
		for i := range 10 {
			if _, err := r.AppendEvent("note", 1, 0, uint64(i), 0, []int{i}); err != nil {
				return err
			}
		}
		return nil
	})
	var bad uint64
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err == nil {
			bad = r.LastSeq() - 3
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	key := binary.BigEndian.AppendUint64(nil, bad)
	at := storetest.ValueAt(t, path, "r", "events", key)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[at+7] ^= 0x01 // in the payload, past the frame's header
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err = store.Open(path, storetest.Options()); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seen []uint64
	err = db.ViewRun("r", func(r *store.RunTx) error {
		return r.Events(0, func(e model.Event) error { seen = append(seen, e.Seq); return nil })
	})
	var ce *store.CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, store.ErrCorrupt) || string(ce.Key) != string(key) || !strings.Contains(ce.Reason, "CRC32C") {
		t.Fatalf("Events over a damaged event: %v, want ErrCorrupt at key %x for its CRC", err, key)
	}
	if len(seen) == 0 || seen[len(seen)-1] != bad-1 {
		t.Errorf("events handed out before the damage: %v, want 1..%d", seen, bad-1)
	}
}
