package tree_test

import (
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

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
