package tree_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// A failure report whose error the store refuses (text that is not UTF-8)
// is refused by Submit itself with ErrInvalid — as a retry is, and as a
// branch with no attempt left is — and nothing is written.
func TestSubmitRefusesAFailureTheStoreRefuses(t *testing.T) {
	for _, attempts := range []int{1, 3} {
		db := storetest.Open(t)
		c := coordinator(t, db, "r", tree.DefaultConfig(), &tree.CoordinatorOptions{MaxAttempts: attempts})
		openStep(t, c, 1, tasks(1))
		l := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1})[0]
		before := dumpRun(t, db, "r")
		var subErr error
		err := db.Update(func(tx *store.Tx) error {
			_, subErr = c.Submit(tx, []rollout.Submission{{Lease: l.ID, Worker: "w", Node: l.Node, Error: "env \xff crashed"}})
			return subErr
		})
		if !errors.Is(subErr, model.ErrInvalid) || err == nil {
			t.Errorf("max attempts %d: a failure report that is not UTF-8: Submit %v, Update %v; want ErrInvalid", attempts, subErr, err)
		}
		if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
			t.Errorf("max attempts %d: the refused report wrote: %s", attempts, d)
		}
	}
}

// A submission's result counts the node's turns after it (its earlier
// ones and the new), and turns encoded ahead must be the submission's
// own: encoded turns of another count are refused with ErrInvalid, and
// nothing is written.
func TestSubmitResultsAndEncodedTurns(t *testing.T) {
	db, c, l := oneBranch(t, 8)
	for from, n := range []int{2, 3} {
		from *= 2
		sub, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, From: from, Turns: turnsN("t", n)})
		if err != nil {
			t.Fatal(err)
		}
		if got := sub.Results[0].Turns; got != from+n {
			t.Errorf("%d turns from %d: result says %d turns, want %d", n, from, got, from+n)
		}
	}
	enc, err := tree.EncodeSubmissions([]rollout.Submission{{Turns: turnsN("u", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	before := dumpRun(t, db, "r")
	err = db.Update(func(tx *store.Tx) error {
		_, err := c.SubmitEncoded(tx, []rollout.Submission{{Lease: l.ID, Worker: "w", Node: l.Node, From: 5, Turns: turnsN("u", 1)}}, enc)
		return err
	})
	if !errors.Is(err, model.ErrInvalid) {
		t.Errorf("two encoded turns for a submission of one: %v, want ErrInvalid", err)
	}
	if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
		t.Errorf("the refused submission wrote: %s", d)
	}
}

// Submit in a transaction of a file without the coordinator's run is
// ErrNotFound, not a panic.
func TestSubmitInAnotherFileIsNotFound(t *testing.T) {
	db := storetest.Open(t)
	c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
	other := storetest.Open(t)
	err := other.Update(func(tx *store.Tx) error {
		_, err := c.Submit(tx, []rollout.Submission{{Node: 1, Worker: "w"}})
		return err
	})
	if !errors.Is(err, model.ErrNotFound) {
		t.Errorf("submit in a file without run r: %v, want ErrNotFound", err)
	}
}

// Turns that would take a branch past MaxTurns are refused (ErrConflict),
// though the interval (K) has room for them.
func TestSubmitRefusesTurnsPastMaxTurns(t *testing.T) {
	_, c, l := oneBranch(t, 3)
	if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: turnsN("t", 4)}); !errors.Is(err, rollout.ErrConflict) {
		t.Errorf("4 turns under MaxTurns 3: %v, want ErrConflict", err)
	}
}

// A submit whose group holds a damaged sibling record is ErrCorrupt (the
// routing that follows it reads every node of the group), with nothing
// written: never a group moved on without the branch it could not read.
func TestSubmitOverADamagedSiblingFails(t *testing.T) {
	db := openUnchecked(t)
	cfg := tree.DefaultConfig()
	cfg.NoScoring, cfg.B0, cfg.K, cfg.MaxTurns = true, 2, 1, 4
	c := coordinator(t, db, "r", cfg, nil)
	openStep(t, c, 1, tasks(1))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 2})
	if len(ls) != 2 {
		t.Fatalf("%d leases, want 2", len(ls))
	}
	damageNode(t, db, "r", ls[1].Node)
	before := lastSeq(t, db)
	_, err := submit(c, rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, Turns: turnsN("t", 1)})
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("submit beside a damaged sibling: %v, want ErrCorrupt", err)
	}
	if after := lastSeq(t, db); after != before {
		t.Errorf("the refused submit wrote events %d..%d", before+1, after)
	}
}

// oneBranch opens step 1 of run "r" (no scoring, K 8, maxTurns) with one
// task and leases one of its branches.
func oneBranch(t *testing.T, maxTurns int) (*store.DB, *tree.Coordinator, rollout.Lease) {
	t.Helper()
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.NoScoring, cfg.K, cfg.MaxTurns = true, 8, maxTurns
	c := coordinator(t, db, "r", cfg, nil)
	openStep(t, c, 1, tasks(1))
	return db, c, lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1})[0]
}
