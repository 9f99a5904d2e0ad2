package server

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// Requests that arrive together for a run nobody has checked yet — every
// rollout worker's first call after the server restarts — wait for one
// whole-run check instead of each running its own, and all get its
// answer.
func TestConcurrentFirstRequestsShareOneRunCheck(t *testing.T) {
	checks, codes := concurrentFirstRequests(t, "r")
	if checks != 1 {
		t.Errorf("%d whole-run checks for %d concurrent first requests, want 1", checks, len(codes))
	}
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("request %d: %d, want 200", i, code)
		}
	}
}

// A shared check that finds no run remembers nothing: the requests that
// waited for it go on, none hangs, and each answers 404.
func TestConcurrentRequestsForAMissingRunEachAnswer404(t *testing.T) {
	_, codes := concurrentFirstRequests(t, "nope")
	for i, code := range codes {
		if code != http.StatusNotFound {
			t.Errorf("request %d: %d, want 404", i, code)
		}
	}
}

// concurrentFirstRequests sends eight requests for run id's frontier at
// once to a fresh handler over a store holding run "r", the first check
// of id lasting until the others have had time to arrive. It returns how
// many checks of id ran and each request's status.
func concurrentFirstRequests(t *testing.T, id string) (int32, []int) {
	t.Helper()
	db := storetest.Open(t)
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun("r", nil, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int32
	release := make(chan struct{})
	h.(*server).soundness.verify = func(tx *store.Tx, run string) (bool, error) {
		if run == id && checks.Add(1) == 1 {
			<-release
		}
		return verifyRun(tx, run)
	}
	codes := make([]int, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/api/v1/runs/"+id+"/frontier", nil))
			codes[i] = w.Code
		})
	}
	// Requests that do not wait for the first check start their own
	// within this wait.
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline) && checks.Load() < 2; {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	return checks.Load(), codes
}
