package tree

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// orderCoordinator is a coordinator over a fresh run of b0 branches per
// task, K=2.
func orderCoordinator(t *testing.T, b0 int) (*store.DB, *Coordinator) {
	t.Helper()
	db := storetest.Open(t)
	cfg := DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns = b0, 2, 10
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun("r", ConfigJSON(cfg), nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c, err := NewCoordinator(db, "r", &cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, c
}

// TestGrantRefusesOlderSnapshot: a grant judged on a snapshot older than
// an earlier grant's would see a branch where it was an interval ago, and
// hand out (over the current holder's lease) work the branch has done.
// Four workers hit this under load; here one snapshot is held open across
// a lease, a submit that routes the group, and a second lease.
func TestGrantRefusesOlderSnapshot(t *testing.T) {
	db, c := orderCoordinator(t, 1)
	if err := db.Update(func(tx *store.Tx) error {
		_, err := c.OpenStep(tx, 1, []rollout.Task{{ID: "t", Prompt: "p"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}

	old := make(chan *store.Tx)
	release := make(chan struct{})
	viewDone := make(chan error)
	go func() {
		viewDone <- db.View(func(tx *store.Tx) error {
			old <- tx
			<-release
			_, err := c.grant(tx, LeaseRequest{Worker: "late", Step: 1})
			return err
		})
	}()
	<-old // a snapshot of the step as opened

	ls, err := c.Lease(LeaseRequest{Worker: "w", Step: 1}, nil)
	if err != nil || len(ls) != 1 {
		t.Fatalf("lease: %v %v", ls, err)
	}
	score := 0.5
	turns := []model.Turn{{Action: "a", Observation: "o"}, {Action: "b", Observation: "o"}}
	if err := db.Update(func(tx *store.Tx) error {
		_, err := c.Submit(tx, []rollout.Submission{{Lease: ls[0].ID, Worker: ls[0].Worker, Node: ls[0].Node, Turns: turns, Score: &score}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	next, err := c.Lease(LeaseRequest{Worker: "w2", Step: 1}, nil)
	if err != nil || len(next) == 0 {
		t.Fatalf("lease after routing: %v %v", next, err)
	}

	close(release)
	if err := <-viewDone; !errors.Is(err, errStaleSnapshot) {
		t.Fatalf("grant on the snapshot from before the submit: %v, want errStaleSnapshot", err)
	}
	// The current holder's lease is untouched.
	c.mu.Lock()
	held := c.leases[next[0].Node]
	c.mu.Unlock()
	if held == nil || held.ID != next[0].ID {
		t.Fatalf("lease of node %d is %+v, want %s", next[0].Node, held, next[0].ID)
	}
}

// TestLeasedOnAnOlderSnapshot: a step's status read in a snapshot taken
// before branches were leased — or even created — counts them as held
// instead of failing to find them (a worker asking for the status got a
// 404 for a node created after its snapshot).
func TestLeasedOnAnOlderSnapshot(t *testing.T) {
	db, c := orderCoordinator(t, 3)
	old := make(chan struct{})
	release := make(chan struct{})
	type result struct {
		n   int
		err error
	}
	got := make(chan result)
	go func() {
		var res result
		res.err = db.View(func(tx *store.Tx) error {
			close(old)
			<-release
			res.n, res.err = c.Leased(tx, 1)
			return res.err
		})
		got <- res
	}()
	<-old // a snapshot from before the step has any branch
	if err := db.Update(func(tx *store.Tx) error {
		_, err := c.OpenStep(tx, 1, []rollout.Task{{ID: "t", Prompt: "p"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ls, err := c.Lease(LeaseRequest{Worker: "w", Step: 1}, nil)
	if err != nil || len(ls) != 3 {
		t.Fatalf("lease: %v %v", ls, err)
	}
	close(release)
	if res := <-got; res.err != nil || res.n != 3 {
		t.Fatalf("Leased on the older snapshot = %d, %v; want 3 held", res.n, res.err)
	}
}
