package replay_test

import (
	"math"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// TestStaleness: one branch samples two turns with version 1 while the
// run is at 1, then — the run at 3, under on_publish continue — two more
// with version 1 and one with version 2 that end it; the group closes at
// version 4. Sampled: lags 0, 0, 2, 2, 1 (mean 1, max 2); consumed: the
// path's oldest turn, version 1, against 4 (3). Stats and the step
// figures say the same.
func TestStaleness(t *testing.T) {
	db := storetest.Open(t)
	cfg := tree.DefaultConfig()
	cfg.B0, cfg.K, cfg.MaxTurns, cfg.NoScoring = 1, 5, 5, true
	if err := db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun("r", tree.ConfigJSON(cfg), nil); return err }); err != nil {
		t.Fatal(err)
	}
	c, err := tree.NewCoordinator(db, "r", nil, &tree.CoordinatorOptions{LeaseTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	update := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	turn := func(v uint64, done bool) model.Turn {
		return model.Turn{Action: "a", Observation: "o", PolicyVersion: v, Done: done}
	}
	update(func(tx *store.Tx) error { _, err := c.OpenStep(tx, 1, []rollout.Task{{ID: "t"}}); return err })
	update(func(tx *store.Tx) error { return c.Publish(tx, 1) })
	ls, err := c.Lease(tree.LeaseRequest{Worker: "w", PolicyVersion: 1}, nil)
	if err != nil || len(ls) != 1 {
		t.Fatalf("%v %v", ls, err)
	}
	l := ls[0]
	sub := func(from int, turns ...model.Turn) {
		t.Helper()
		update(func(tx *store.Tx) error {
			_, err := c.Submit(tx, []rollout.Submission{{Lease: l.ID, Worker: "w", Node: l.Node, From: from, Turns: turns}})
			return err
		})
	}
	sub(0, turn(1, false), turn(1, false))
	update(func(tx *store.Tx) error { return c.Publish(tx, 3) })
	sub(2, turn(1, false), turn(1, false))
	sub(4, turn(2, true))
	update(func(tx *store.Tx) error { return c.Publish(tx, 4) })
	update(func(tx *store.Tx) error { _, err := c.Close(tx, 1, 1, nil, 0); return err })

	want := model.Staleness{SampledMean: 1, SampledMax: 2, ConsumedMean: 3, ConsumedMax: 3}
	same := func(what string, got model.Staleness) {
		t.Helper()
		if math.Abs(got.SampledMean-want.SampledMean) > 1e-12 || got.SampledMax != want.SampledMax ||
			got.ConsumedMean != want.ConsumedMean || got.ConsumedMax != want.ConsumedMax {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
	}
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		rs, err := replay.Stats(r)
		if err != nil {
			return err
		}
		same("stats, step 1", rs.Steps[0].Staleness)
		same("stats, total", rs.Total.Staleness)
		figs, err := replay.StepFigures(r)
		if err != nil {
			return err
		}
		same("step figures", figs[0].Staleness)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The sampled staleness averages over the turns whose writer recorded a
// policy version: turns without one (version 0) say nothing and are not
// counted as fresh. A single versioned turn is a mean of itself.
func TestStalenessCountsVersionedTurnsOnly(t *testing.T) {
	var st replay.StalenessTracker
	st.Observe(model.Event{Seq: 1, Kind: model.EvRunVersion}, &model.Run{PolicyVersion: 3})
	st.Observe(model.Event{Seq: 2, Kind: model.EvTurns, Step: 1, Node: 1}, &model.TurnsPayload{Count: 1, Turns: 1, MinVersion: 1, MaxVersion: 1, Oldest: 1})
	if got := st.Of(1); got.SampledMean != 2 || got.SampledMax != 2 {
		t.Errorf("one turn of version 1 at version 3: %+v, want mean and max 2", got)
	}
	st.Observe(model.Event{Seq: 3, Kind: model.EvTurns, Step: 1, Node: 2}, &model.TurnsPayload{Count: 3, Turns: 3})
	if got := st.Of(1); got.SampledMean != 2 || got.SampledMax != 2 {
		t.Errorf("three turns without a version added: %+v, want mean and max still 2", got)
	}
}
