package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// setSequence sets the sequence of run's sub-bucket name in the closed
// file at path, below the store, as a damaged header would.
func setSequence(t *testing.T, path, run, name string, seq func(now uint64) uint64) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	err = bdb.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte(name))
		return b.SetSequence(seq(b.Sequence()))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A writer refuses a run whose id sequences disagree with its records: a
// sequence behind its records would hand a new record the id of one that
// exists (with the events sequence damaged to 0, a writer overwrote event
// 1 and Update returned nil). Every write is refused with ErrCorrupt
// naming the bucket, whatever it writes, the file is left as it was, and
// the file's other run takes writes as before.
func TestAWriterRefusesARunWhoseSequencesDisagree(t *testing.T) {
	good, _ := twoRuns(t)
	minus := func(n uint64) func(uint64) uint64 { return func(s uint64) uint64 { return s - n } }
	writes := map[string]func(*store.RunTx) error{
		"an event": func(r *store.RunTx) error { _, err := r.AppendEvent("test.note", 0, 0, 0, 0, nil); return err },
		"a group":  func(r *store.RunTx) error { _, err := r.OpenGroup(store.GroupSpec{Step: 9}); return err },
		"a status": func(r *store.RunTx) error { return r.SetRunStatus(model.RunFinished) },
	}
	for _, c := range []struct {
		bucket string
		seq    func(uint64) uint64
		want   string
	}{
		{"events", func(uint64) uint64 { return 0 }, "the last event is"},
		{"events", minus(1), "the last event is"},
		{"events", func(s uint64) uint64 { return s + 1 }, "the last event is"}, // the log would skip a number
		{"nodes", minus(1), "the sequence"},
		{"turns", minus(1), "the sequence"},
		{"rubrics", minus(1), "the sequence"},
		{"groups", minus(1), "the sequence"},
	} {
		for what, write := range writes {
			t.Run(c.bucket+"/"+what, func(t *testing.T) {
				path := tempPath(t, "d.db")
				copyFile(t, good, path)
				setSequence(t, path, "r1", c.bucket, c.seq)
				before := fileDigest(t, path)
				db, err := store.Open(path, storetest.Options())
				if err != nil {
					t.Fatal(err)
				}
				err = db.UpdateRun("r1", func(r *store.RunTx) error {
					return write(r)
				})
				var ce *store.CorruptError
				if !errors.As(err, &ce) || ce.Bucket != "runs/r1/"+c.bucket || !strings.Contains(ce.Reason, c.want) {
					t.Errorf("write: %v, want a CorruptError of runs/r1/%s saying %q", err, c.bucket, c.want)
				}
				// A write that goes on past the refusal does not commit.
				err = db.Update(func(tx *store.Tx) error {
					_, _ = tx.Run("r1")
					r, err := tx.Run("r")
					if err != nil {
						return err
					}
					return write(r)
				})
				if !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("a transaction that ignored the refusal: %v, want ErrCorrupt", err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				if fileDigest(t, path) != before {
					t.Error("the refused writes changed the file")
				}
				db, err = store.Open(path, storetest.Options())
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				update(t, db, func(tx *store.Tx) error {
					r, err := tx.Run("r")
					if err != nil {
						return err
					}
					return write(r)
				})
			})
		}
	}
}

// A reader that reports a run's event count from the events sequence (a
// summary, a run handle in checked mode) compares it with the last event first:
// with the sequence damaged to 0, show printed "events 0" for a run of
// thousands of events. It is damage, named, and the other run reads.
func TestReadersVouchForTheEventCount(t *testing.T) {
	path, _ := twoRuns(t)
	db := openReadOnly(t, path)
	var last uint64
	view(t, db, func(tx *store.Tx) error {
		if err := walk(tx, "r1", store.CheckSummary|store.CheckLastEvent); err != nil {
			t.Errorf("sound file: %v", err)
		}
		cr, err := checkedRun(tx, "r1")
		if err == nil {
			last = cr.LastSeq()
		}
		if err != nil || last == 0 {
			t.Errorf("sound file: LastSeq %d, %v", last, err)
		}
		return nil
	})
	db.Close()
	setSequence(t, path, "r1", "events", func(uint64) uint64 { return 0 })
	db = openReadOnly(t, path)
	defer db.Close()
	view(t, db, func(tx *store.Tx) error {
		want := fmt.Sprintf("the last event is %d but the sequence is at 0", last)
		err := walk(tx, "r1", store.CheckSummary|store.CheckLastEvent)
		var ce *store.CorruptError
		if !errors.As(err, &ce) || ce.Bucket != "runs/r1/events" || !strings.Contains(ce.Reason, want) {
			t.Errorf("VerifySummary: %v, want %q in runs/r1/events", err, want)
		}
		cr, err := checkedRun(tx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if s, err := cr.Summary(model.SummaryOptions{}); !errors.As(err, &ce) || !strings.Contains(ce.Reason, want) {
			t.Errorf("Summary in checked mode: %d events, %v, want %q", s.Events, err, want)
		}
		if err := walk(tx, "r", store.CheckSummary|store.CheckLastEvent); err != nil {
			t.Errorf("the other run: %v", err)
		}
		return nil
	})
}
