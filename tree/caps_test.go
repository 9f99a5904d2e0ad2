package tree_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// TestNoRequestStallsOtherRuns: while one request opens the largest step
// part the caps allow (MaxRootsPerOpen roots in one transaction), and then
// while 200 workers lease a few branches each from that step, another
// run's small writes never wait a second.
func TestNoRequestStallsOtherRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 32k nodes")
	}
	db := storetest.OpenPath(t, filepath.Join(t.TempDir(), "wide.db"), store.DefaultOptions()) // fsync on
	cfg := tree.DefaultConfig()
	cfg.B0 = 16
	c := coordinator(t, db, "wide", cfg, nil)
	newRun(t, db, "other", tree.DefaultConfig())
	other, err := tree.NewCoordinator(db, "other", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	openStep(t, other, 1, tasks(1))

	// The other run's writes: a small one after another, each timed.
	stop := make(chan struct{})
	var worst time.Duration
	var writes int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			err := db.Update(func(tx *store.Tx) error {
				r, err := tx.Run("other")
				if err != nil {
					return err
				}
				_, err = r.AppendEvent("test.tick", 1, 0, 0, 0, map[string]int{"i": i})
				return err
			})
			if err != nil {
				t.Error(err)
				return
			}
			worst = max(worst, time.Since(start))
			writes++
			time.Sleep(time.Millisecond)
		}
	}()

	// Four requests, each the most one may open: a step 32,768 branches
	// wide.
	per := tree.MaxRootsPerOpen / cfg.B0
	ts := make([]rollout.Task, 4*per)
	for i := range ts {
		ts[i] = rollout.Task{ID: fmt.Sprint("t", i)}
	}
	var opened time.Duration
	for k := 1; k <= 4; k++ {
		start := time.Now()
		openStep(t, c, 1, ts[:k*per])
		opened = max(opened, time.Since(start))
	}
	if err := db.Update(func(tx *store.Tx) error { _, err := c.OpenStep(tx, 2, ts[:per+1]); return err }); !errors.Is(err, model.ErrInvalid) {
		t.Fatalf("opening more than MaxRootsPerOpen roots at once: %v, want ErrInvalid", err)
	}

	var wg sync.WaitGroup
	leaseTimes := make([]time.Duration, 200)
	for w := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			ls, err := c.Lease(tree.LeaseRequest{Worker: fmt.Sprint("w", w), Max: 16, Step: 1}, nil)
			leaseTimes[w] = time.Since(t0)
			if err != nil || len(ls) != 16 {
				t.Errorf("worker %d: %d leases, %v", w, len(ls), err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-done
	slowest := time.Duration(0)
	for _, d := range leaseTimes {
		slowest = max(slowest, d)
	}
	t.Logf("opened %d roots a request, the slowest in %v; 200 workers leased 16 each of %d, the slowest in %v; the other run's %d writes waited at most %v",
		tree.MaxRootsPerOpen, opened.Round(time.Millisecond), 4*tree.MaxRootsPerOpen, slowest.Round(time.Millisecond), writes, worst.Round(time.Millisecond))
	if raceEnabled {
		// The race detector slows the writes some tenfold; .ci/run times
		// this test without it.
		return
	}
	if worst > time.Second {
		t.Fatalf("another run's write waited %v", worst)
	}
	if slowest > time.Second {
		t.Fatalf("a lease took %v", slowest)
	}
}
