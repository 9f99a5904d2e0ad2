package store_test

import (
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A write transaction takes a run's counters and the word that its
// sequences are sound from the commit before it, when that commit was its
// handle's (txcarry.go). Anything else that commits in between is not
// vouched for: a sequence damaged through bbolt after a commit is refused
// by the next write, as on a fresh open.
func TestACarriedRunIsCheckedAgainAfterAnotherCommit(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err == nil {
			_, err = r.OpenGroup(store.GroupSpec{Step: 1})
		}
		return err
	})
	addNote := func(r *store.RunTx) error { _, err := r.AppendEvent("test.note", 0, 0, 0, 0, nil); return err }
	if err := db.UpdateRun("r", addNote); err != nil { // carries r
		t.Fatal(err)
	}
	setEvents := func(seq uint64) (was uint64) {
		t.Helper()
		err := storetest.Bolt(db).Update(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte("events"))
			was = b.Sequence()
			return b.SetSequence(seq)
		})
		if err != nil {
			t.Fatal(err)
		}
		return was
	}
	defer setEvents(setEvents(1)) // as it was, for the check at cleanup
	err := db.UpdateRun("r", addNote)
	var ce *store.CorruptError
	if !errors.As(err, &ce) || ce.Bucket != "runs/r/events" || !strings.Contains(ce.Reason, "the last event is") {
		t.Fatalf("write after a commit through bbolt: %v, want the events sequence's CorruptError", err)
	}
}

// The counters a transaction carries are the file's: a transaction that
// tallies and then fails leaves nothing behind for the next, which counts
// from the file; and the figures after many carried commits are the
// records' (Check recounts them).
func TestCarriedCountersStayTheFiles(t *testing.T) {
	db := storetest.Open(t)
	update(t, db, func(tx *store.Tx) error { _, err := tx.CreateRun("r", nil, nil); return err })
	failed := errors.New("the trainer gave up")
	for step := uint64(1); step <= 4; step++ {
		var group, root uint64
		err := db.UpdateRun("r", func(r *store.RunTx) error {
			g, err := r.OpenGroup(store.GroupSpec{Step: step})
			if err != nil {
				return err
			}
			n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID})
			group, root = g.ID, n.ID
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		// Tallies a reward and a status into the carried counters, then
		// rolls back.
		err = db.UpdateRun("r", func(r *store.RunTx) error {
			if err := r.AppendTurns(root, 0, model.Turn{Action: "a", Reward: 1, Done: true}); err != nil {
				return err
			}
			if err := r.SetNodeStatus(root, model.NodeCompleted); err != nil {
				return err
			}
			return failed
		})
		if !errors.Is(err, failed) {
			t.Fatalf("step %d: %v", step, err)
		}
		err = db.UpdateRun("r", func(r *store.RunTx) error {
			if err := r.AppendTurns(root, 0, model.Turn{Action: "b"}, model.Turn{Action: "c", Done: true}); err != nil {
				return err
			}
			if err := r.SetReward(root, 0.5); err != nil {
				return err
			}
			if err := r.SetNodeStatus(root, model.NodeCompleted); err != nil {
				return err
			}
			return r.CloseGroup(step, group)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, db)
	var s model.RunSummary
	view(t, db, func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err == nil {
			s, err = r.Summary(model.SummaryOptions{})
		}
		return err
	})
	if s.Groups != 4 || s.OpenGroups != 0 || s.Nodes != 4 || s.Turns != 8 || s.Rewarded != 4 || s.Leaves != 4 {
		t.Fatalf("summary %+v, want 4 closed groups of one completed, rewarded node with 2 turns", s)
	}
}
