package tree_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// Policy versions: the run's current one, max_staleness at lease and at
// submit, and what publishing does to the leases in flight.

func publish(t *testing.T, c *tree.Coordinator, v uint64) {
	t.Helper()
	if err := c.DB().Update(func(tx *store.Tx) error { return c.Publish(tx, v) }); err != nil {
		t.Fatalf("publish %d: %v", v, err)
	}
}

func versioned(prefix string, n int, v uint64) []model.Turn {
	ts := turnsN(prefix, n)
	for i := range ts {
		ts[i].PolicyVersion = v
	}
	return ts
}

// TestMaxStalenessRefusesStaleWork: with max_staleness 1 and the run at
// version 3, a worker at version 1 is refused a lease, and a submit whose
// turns were sampled by version 1 is refused and writes nothing; version 2
// is within the bound. The errors name the versions.
func TestMaxStalenessRefusesStaleWork(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxStaleness = 2, 3, 1
	c := coordinator(t, db, "r", cfg, nil)
	openStep(t, c, 1, tasks(1))
	publish(t, c, 3)
	seq := lastSeq(t, db)
	if err := db.Update(func(tx *store.Tx) error { return c.Publish(tx, 3) }); err != nil || lastSeq(t, db) != seq {
		t.Fatalf("publishing the current version again: %v, want a no-op (events %d → %d)", err, seq, lastSeq(t, db))
	}
	if err := db.Update(func(tx *store.Tx) error { return c.Publish(tx, 2) }); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("publishing an older version: %v, want ErrInvalid", err)
	}
	ls, err := c.Lease(tree.LeaseRequest{Worker: "old", PolicyVersion: 1}, nil)
	if !errors.Is(err, rollout.ErrStale) || len(ls) != 0 || !strings.Contains(err.Error(), "version 1") || !strings.Contains(err.Error(), "version 3") {
		t.Fatalf("a worker two versions behind: %v %v, want ErrStale naming versions 1 and 3", ls, err)
	}
	ls = lease(t, c, tree.LeaseRequest{Worker: "w", PolicyVersion: 2})
	if len(ls) != 2 || ls[0].RunVersion != 3 || ls[0].PolicyVersion != 2 {
		t.Fatalf("a worker one version behind: %+v", ls)
	}
	before := dumpRun(t, db, "r")
	_, err = submit(c, rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, Turns: append(versioned("a", 2, 2), versioned("b", 1, 1)...)})
	if !errors.Is(err, rollout.ErrStale) {
		t.Fatalf("a turn two versions behind: %v, want ErrStale", err)
	}
	if d := diffDump(dumpRun(t, db, "r"), before); d != "" {
		t.Fatalf("a stale submit wrote: %s", d)
	}
	if _, err := submit(c, rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, Turns: versioned("a", 3, 2), Score: ptr(0.5)}); err != nil {
		t.Fatalf("turns one version behind: %v", err)
	}
}

// TestOnPublish: a branch leased at version 1 whose last turns arrive
// after version 2 was published. Under "continue" the lease stands and
// the turns are accepted with their own version (a branch may span
// versions); under "abort" the lease is void — the branch is leased again
// at once, the old lease's submit and renewal are refused — and the turns
// sampled with the new weights are accepted.
func TestOnPublish(t *testing.T) {
	for _, policy := range []tree.OnPublish{tree.OnPublishContinue, tree.OnPublishAbort} {
		t.Run(string(policy), func(t *testing.T) {
			db := storetest.Open(t)
			cfg := tree.DefaultConfig()
			cfg.B0, cfg.K, cfg.OnPublish = 1, 4, policy
			c := coordinator(t, db, "r", cfg, &tree.CoordinatorOptions{LeaseTTL: time.Hour})
			openStep(t, c, 1, tasks(1))
			publish(t, c, 1)
			l := lease(t, c, tree.LeaseRequest{Worker: "w", PolicyVersion: 1})[0]
			if _, err := submit(c, rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, Turns: versioned("old", 2, 1)}); err != nil {
				t.Fatal(err)
			}
			publish(t, c, 2)
			// The heartbeat says at once whether the lease stands, and why not.
			st := c.Renew("w", []string{l.ID})[0]
			if voided := !st.Held && strings.Contains(st.Reason, "version 2 was published"); voided != (policy == tree.OnPublishAbort) {
				t.Fatalf("%s: the heartbeat after version 2: %+v", policy, st)
			}
			again := lease(t, c, tree.LeaseRequest{Worker: "w2", PolicyVersion: 2})
			renewed := c.Renew("w", []string{l.ID})[0].Held
			late := rollout.Submission{Lease: l.ID, Worker: "w", Node: l.Node, From: 2, Turns: versioned("old", 2, 1), Score: ptr(0.5)}
			_, err := submit(c, late)
			node := func() (n model.Node) {
				_ = db.View(func(tx *store.Tx) error { r, _ := tx.Run("r"); n, _ = r.Node(l.Node); return nil })
				return n
			}
			switch policy {
			case tree.OnPublishContinue:
				if err != nil || !renewed || len(again) != 0 {
					t.Fatalf("continue: leased again %+v, renewed %t, submit %v", again, renewed, err)
				}
				if n := node(); n.Turns != 4 || n.MinVersion != 1 || n.MaxVersion != 1 || len(n.Scores) != 1 {
					t.Fatalf("continue: node %+v, want 4 turns of version 1, scored", n)
				}
			case tree.OnPublishAbort:
				if len(again) != 1 || again[0].Node != l.Node || again[0].From != 2 || again[0].RunVersion != 2 || renewed || !errors.Is(err, rollout.ErrLeaseLost) {
					t.Fatalf("abort: leased again %+v, renewed %t, submit %v", again, renewed, err)
				}
				if n := node(); n.Turns != 2 {
					t.Fatalf("abort: the refused turns were written: %+v", n)
				}
				fresh := rollout.Submission{Lease: again[0].ID, Worker: "w2", Node: l.Node, From: 2, Turns: versioned("new", 2, 2), Score: ptr(0.5)}
				if _, err := submit(c, fresh); err != nil {
					t.Fatalf("abort: the turns of the new weights: %v", err)
				}
				if n := node(); n.Turns != 4 || n.MinVersion != 1 || n.MaxVersion != 2 {
					t.Fatalf("abort: node %+v, want turns of versions 1 and 2", n)
				}
			}
		})
	}
}
