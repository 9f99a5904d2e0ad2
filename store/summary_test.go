package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	bolt "go.etcd.io/bbolt"
)

// stepsFile writes a run "r" of steps one-group steps, every group closed
// but those of the steps in open, on 1 KiB pages (some 16 counters a
// page), and returns its path.
func stepsFile(t *testing.T, steps int, open ...uint64) string {
	t.Helper()
	path := tempPath(t, "steps.db")
	db := openForTest(t, path)
	keep := map[uint64]bool{}
	for _, s := range open {
		keep[s] = true
	}
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		for step := uint64(1); step <= uint64(steps); step++ {
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: fmt.Sprintf("task-%d", step)})
			if err != nil {
				return err
			}
			if !keep[step] {
				if err := r.CloseGroup(step, g.ID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// openForTest opens a new file at path on 1 KiB pages, without fsync.
func openForTest(t *testing.T, path string) *store.DB {
	t.Helper()
	o := syncOptions()
	o.NoSync = true
	o.PageSize = checkedPageSize
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// summaryOf is run r's summary, read plain or in checked mode, with the
// pages the checked read walked.
func summaryOf(t *testing.T, path string, checkReads bool, o model.SummaryOptions) (s model.RunSummary, pages int) {
	t.Helper()
	db := openReadOnly(t, path)
	defer db.Close()
	view(t, db, func(tx *store.Tx) error {
		if checkReads {
			if err := tx.CheckReads(); err != nil {
				return err
			}
		}
		r, err := tx.Run("r")
		if err != nil {
			return err
		}
		if s, err = r.Summary(o); checkReads {
			pages = store.CheckedPages(r)
		}
		return err
	})
	return s, pages
}

// The open step is the latest step with an open group, wherever it lies:
// the summary looks for it from the newest step back, a window of steps at
// a time, and finds what the per-step rows say, plain and checked.
func TestSummaryOpenStepIsTheLatestWithAnOpenGroup(t *testing.T) {
	for _, open := range [][]uint64{nil, {300}, {299}, {296}, {3, 7}, {1}, {1, 300}, {280, 150}} {
		path := stepsFile(t, 300, open...)
		var want uint64
		rows, _ := summaryOf(t, path, false, model.SummaryOptions{Steps: true})
		for _, st := range rows.Steps {
			if st.OpenGroups > 0 {
				want = st.Step
			}
		}
		if len(open) > 0 && want != max(open[0], open[len(open)-1]) {
			t.Fatalf("open %v: the per-step rows say step %d", open, want)
		}
		for _, checkReads := range []bool{false, true} {
			s, _ := summaryOf(t, path, checkReads, model.SummaryOptions{})
			if s.OpenStep != want || s.OpenGroups != len(open) || s.Groups != 300 {
				t.Errorf("open %v, checked reads %v: open step %d, %d of %d groups open; want step %d, %d of 300",
					open, checkReads, s.OpenStep, s.OpenGroups, s.Groups, want, len(open))
			}
		}
	}
}

// A checked summary reads a few pages whatever the run's length: the
// paths to the totals, the newest steps' counters and the last event, not
// every step's counters. With the per-step rows it reads them all.
func TestCheckedSummaryReadsFewPages(t *testing.T) {
	few, _ := summaryOf(t, stepsFile(t, 20, 20), true, model.SummaryOptions{})
	_, short := summaryOf(t, stepsFile(t, 20, 20), true, model.SummaryOptions{})
	long := stepsFile(t, 1000, 1000)
	s, many := summaryOf(t, long, true, model.SummaryOptions{})
	_, rows := summaryOf(t, long, true, model.SummaryOptions{Steps: true})
	t.Logf("20 steps: %d pages; 1000 steps: %d pages, %d with the per-step rows", short, many, rows)
	if few.OpenStep != 20 || s.OpenStep != 1000 {
		t.Fatalf("open steps %d and %d, want 20 and 1000", few.OpenStep, s.OpenStep)
	}
	if many > 2*short || rows < 4*many { // the b-trees are deeper at 1000 steps: a page more per level

		t.Errorf("checked %d pages at 20 steps, %d at 1000 (%d with rows): want about the same, rows many more", short, many, rows)
	}
}

// A damaged counter the summary reads is damage: the checked summary
// returns a *CorruptError naming the counters, not figures.
func TestCheckedSummaryReportsDamagedCounters(t *testing.T) {
	path := stepsFile(t, 300, 290)
	for name, key := range map[string]uint64{"totals": 0, "an open step": 290, "a step after it": 295} {
		t.Run(name, func(t *testing.T) {
			bad := damagedCopy(t, path, func(b []byte) {})
			rawUpdate(t, bad, func(tx *bolt.Tx) error {
				c := tx.Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte("counts"))
				k := u64(key)
				v := append([]byte(nil), c.Get(k)...)
				v[len(v)-1] ^= 0xff // the payload no longer matches its CRC
				return c.Put(k, v)
			})
			db := openReadOnly(t, bad)
			defer db.Close()
			err := db.View(func(tx *store.Tx) error {
				r, err := checkedRun(tx, "r")
				if err == nil {
					_, err = r.Summary(model.SummaryOptions{})
				}
				return err
			})
			var ce *store.CorruptError
			if !errors.As(err, &ce) || ce.Bucket != "runs/r/counts" {
				t.Errorf("summary of a damaged counter: %v, want a *CorruptError in runs/r/counts", err)
			}
		})
	}
}

// Steps far apart end the search too: an open group at step 1 under a
// closed one at the last step there can be is found, and so it is under a
// counter whose key lies past every step (a damaged file): the windows of
// the search do not wrap around.
func TestSummaryOpenStepAcrossAHugeGap(t *testing.T) {
	const lastStep = 1<<53 - 1
	path := tempPath(t, "gap.db")
	db := openForTest(t, path)
	update(t, db, func(tx *store.Tx) error {
		r, err := tx.CreateRun("r", nil, nil)
		if err != nil {
			return err
		}
		if _, err := r.OpenGroup(store.GroupSpec{Step: 1, Task: "open"}); err != nil {
			return err
		}
		g, err := r.OpenGroup(store.GroupSpec{Step: lastStep, Task: "closed"})
		if err != nil {
			return err
		}
		return r.CloseGroup(g.Step, g.ID)
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(what string) {
		for _, checkReads := range []bool{false, true} {
			if s, _ := summaryOf(t, path, checkReads, model.SummaryOptions{}); s.OpenStep != 1 {
				t.Errorf("%s, checked reads %v: open step %d, want 1", what, checkReads, s.OpenStep)
			}
		}
	}
	read("steps 1 and 2^53-1")
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("runs")).Bucket([]byte("r")).Bucket([]byte("counts"))
		return c.Put(u64(1<<64-2), append([]byte(nil), c.Get(u64(lastStep))...))
	})
	read("a counter at step 2^64-2")
}
