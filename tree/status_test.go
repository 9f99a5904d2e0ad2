package tree_test

import (
	"errors"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// Status is remembered per snapshot for the pollers of a step, so it must
// follow every commit, see a write transaction's own uncommitted writes,
// and count the leases anew each time; a caller changing the Done it got
// changes nothing for the next.
func TestStatusFollowsEveryCommit(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns, cfg.NoScoring = 2, 1, 1, true
	c := coordinator(t, db, "r", cfg, nil)
	g := openStep(t, c, 1, tasks(1))[0]
	view := func() rollout.StepStatus {
		t.Helper()
		var st rollout.StepStatus
		if err := db.View(func(tx *store.Tx) (err error) { st, err = c.Status(tx, 1); return err }); err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := view(); st.Active != 2 || st.Leased != 0 || len(st.Done) != 0 {
		t.Fatalf("fresh step: %+v", st)
	}
	ls := lease(t, c, tree.LeaseRequest{Worker: "w", Max: 1, Step: 1})
	if st := view(); st.Leased != 1 || st.Active != 2 { // no commit: only the leases moved
		t.Fatalf("one branch leased: %+v", st)
	}
	if _, err := submit(c, rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, Turns: turnsN("a", 1)}); err != nil {
		t.Fatal(err)
	}
	if st := view(); st.Active != 1 || st.Leased != 0 {
		t.Fatalf("one branch ended: %+v", st)
	}
	// A write transaction sees its own write before it commits.
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		if err := r.SetNodeStatus(g.Roots[1], model.NodeFailed); err != nil {
			return err
		}
		st, err := c.Status(tx, 1)
		if err == nil && (st.Active != 0 || len(st.Done) != 1) {
			t.Errorf("inside the write: %+v", st)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st := view()
	if st.Active != 0 || len(st.Done) != 1 || st.Done[0] != g.ID {
		t.Fatalf("every branch ended: %+v", st)
	}
	st.Done[0] = 99
	if again := view(); again.Done[0] != g.ID {
		t.Fatalf("a caller's change to Done reached the next status: %+v", again)
	}
}

// A restarted coordinator learns of the branches that wait for a remote
// score or a deferred reward from the first status it reads, and times
// their PendingTTL from then: a later pending listing dates both waits
// from that status, not from when it was asked.
func TestStatusStartsTheWaitsOfARestartedCoordinator(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns, cfg.PendingTTLMs, cfg.RemoteScores = 2, 2, 4, 60_000, true
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := coordinator(t, db, "r", cfg, &tree.CoordinatorOptions{LeaseTTL: time.Hour, Now: clk.now})
	openStep(t, c, 1, tasks(1))
	ls := lease(t, c, tree.LeaseRequest{Worker: "w"})
	ended := rollout.Submission{Lease: ls[0].ID, Worker: "w", Node: ls[0].Node, RewardPending: true,
		Turns: []model.Turn{{Action: "x", Observation: "end", Done: true}}}
	scored := rollout.Submission{Lease: ls[1].ID, Worker: "w", Node: ls[1].Node,
		Turns: []model.Turn{{Action: "x", Observation: "o"}, {Action: "y", Observation: "o"}}}
	if _, err := submit(c, ended, scored); err != nil {
		t.Fatal(err)
	}

	clk.add(time.Hour)
	restarted, err := tree.NewCoordinator(db, "r", &cfg, &tree.CoordinatorOptions{LeaseTTL: time.Hour, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	seen := clk.now()
	var st rollout.StepStatus
	if err := db.View(func(tx *store.Tx) (err error) { st, err = restarted.Status(tx, 1); return err }); err != nil {
		t.Fatal(err)
	}
	if st.AwaitingRewards != 1 || st.AwaitingScores != 1 {
		t.Fatalf("status: %+v, want a reward and a score awaited", st)
	}
	clk.add(30 * time.Second)
	var p rollout.Pending
	if err := db.View(func(tx *store.Tx) (err error) { p, err = restarted.Pending(tx, 1); return err }); err != nil {
		t.Fatal(err)
	}
	if len(p.Rewards) != 1 || len(p.Scores) != 1 {
		t.Fatalf("pending: %+v", p)
	}
	for what, w := range map[string]rollout.PendingWork{"reward": p.Rewards[0], "score": p.Scores[0]} {
		if w.SinceAt != seen.UnixNano() || w.DueAt != seen.Add(time.Minute).UnixNano() {
			t.Errorf("the awaited %s: since %v, due %v; want since the status at %v, due a minute later",
				what, time.Unix(0, w.SinceAt), time.Unix(0, w.DueAt), seen)
		}
	}
}

// The status of a step with a damaged group record (or run record) is
// ErrCorrupt, never the status of what could be read; and a read that
// failed is not remembered: read again in the same snapshot it fails
// again rather than answering from memory.
func TestStatusOfADamagedStepFails(t *testing.T) {
	for _, what := range []string{"group", "run"} {
		db := openUnchecked(t)
		c := coordinator(t, db, "r", tree.DefaultConfig(), nil)
		groups := openStep(t, c, 1, tasks(2))
		if what == "group" {
			damageGroup(t, db, "r", 1, groups[1].ID)
		} else {
			damageRecord(t, db, "r", "", []byte("run"))
		}
		err := db.View(func(tx *store.Tx) error {
			for i := range 2 {
				if _, err := c.Status(tx, 1); !errors.Is(err, store.ErrCorrupt) {
					t.Errorf("status read %d of a step with a damaged %s record: %v, want ErrCorrupt", i+1, what, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
