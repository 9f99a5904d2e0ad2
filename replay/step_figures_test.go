package replay_test

import (
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay/internal/replaytest"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A follower asked again and again while the run is written answers what
// StepFigures over the whole log answers, each time, although it reads
// only the events new since its last call; the figures it serves end with
// the finished run's.
func TestStepFollowerMatchesStepFigures(t *testing.T) {
	db := storetest.Open(t)
	spec := replaytest.MediumSpec("f")
	var follower replay.StepFollower
	var calls, withPools int
	compare := func() {
		t.Helper()
		err := db.View(func(tx *store.Tx) error {
			r, err := tx.Run(spec.ID)
			if err != nil {
				return err
			}
			got, err := follower.Figures(r)
			if err != nil {
				return err
			}
			want, err := replay.StepFigures(r)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("call %d (seq %d): the follower says\n %+v\nthe whole log says\n %+v", calls, r.LastSeq(), got, want)
			}
			for _, m := range got {
				if m.Pools[model.PoolPublic]+m.Pools[model.PoolCandidate] > 0 {
					withPools++
					break
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		calls++
	}
	mutations := 0
	replaytest.BuildRun(t, db, spec, replaytest.PerTx(t, db, spec.ID, func() {
		if mutations++; mutations%7 == 0 {
			compare()
		}
	}))
	compare()
	if calls < 10 || withPools == 0 {
		t.Fatalf("%d calls, %d with rubrics in the pools: the run did not exercise the follower", calls, withPools)
	}
}

// A follower handed another run answers for that run, and one handed a
// reader older than its place in the log (a request that began before the
// previous one) answers for that reader's snapshot.
func TestStepFollowerOlderReaderAndOtherRun(t *testing.T) {
	db := storetest.Open(t)
	a, b := replaytest.SmallSpec("a"), replaytest.MediumSpec("b")
	replaytest.BuildOneTx(t, db, a)
	replaytest.BuildOneTx(t, db, b)
	// Run a's pools differ from b's from its first step.
	err := db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("a")
		if err != nil {
			return err
		}
		for range 3 {
			if _, err := r.PutRubric(model.Rubric{Pool: model.PoolPublic, Text: "only in run a", CreatedStep: 2,
				Usage: model.RubricUsage{LastActivation: -1}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var follower replay.StepFollower
	figures := func(tx *store.Tx, id string) (got, want []model.StepMetrics) {
		t.Helper()
		r, err := tx.Run(id)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = follower.Figures(r); err != nil {
			t.Fatal(err)
		}
		if want, err = replay.StepFigures(r); err != nil {
			t.Fatal(err)
		}
		return got, want
	}
	var before []model.StepMetrics
	err = db.View(func(tx *store.Tx) error {
		for _, id := range []string{"a", "b", "a", "b"} {
			if got, want := figures(tx, id); !reflect.DeepEqual(got, want) {
				t.Errorf("run %s: the follower says %+v, want %+v", id, got, want)
			}
		}
		before, _ = figures(tx, "b")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A reader held open while a rubric moves run b's pools on.
	older, moved, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() {
		done <- db.View(func(tx *store.Tx) error {
			close(older)
			<-moved
			got, want := figures(tx, "b")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("an older reader: the follower says %+v, want %+v", got, want)
			}
			return nil
		})
	}()
	<-older
	err = db.Update(func(tx *store.Tx) error {
		r, err := tx.Run("b")
		if err != nil {
			return err
		}
		_, err = r.PutRubric(model.Rubric{Pool: model.PoolCandidate, Text: "added while a reader is open", CreatedStep: 4})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *store.Tx) error {
		got, want := figures(tx, "b")
		if !reflect.DeepEqual(got, want) || reflect.DeepEqual(got, before) {
			t.Errorf("after the new rubric: the follower says %+v, want %+v (before it: %+v)", got, want, before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	close(moved)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
