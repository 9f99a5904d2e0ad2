package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
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
	h, _ := handlerWithRun(t, "r")
	checks, codes := concurrentFirstRequests(h, "r")
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
// waited for it go on, none hangs, and each answers 404. Once the run
// exists, its first requests share one check again.
func TestConcurrentRequestsForAMissingRunEachAnswer404(t *testing.T) {
	h, db := handlerWithRun(t, "r")
	_, codes := concurrentFirstRequests(h, "later")
	for i, code := range codes {
		if code != http.StatusNotFound {
			t.Errorf("request %d: %d, want 404", i, code)
		}
	}
	createEmptyRun(t, db, "later")
	if checks, codes := concurrentFirstRequests(h, "later"); checks != 1 || codes[0] != http.StatusOK {
		t.Errorf("once the run exists: %d checks for %d concurrent first requests (want 1), first answered %d", checks, len(codes), codes[0])
	}
}

// handlerWithRun is a handler over a fresh store that holds run id.
func handlerWithRun(t *testing.T, id string) (*server, *store.DB) {
	t.Helper()
	db := storetest.Open(t)
	createEmptyRun(t, db, id)
	h, err := NewHandler(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h.(*server), db
}

// concurrentFirstRequests sends eight requests for run id's frontier at
// once, the first check of id lasting until the others have had time to
// arrive. It returns how many checks of id ran and each request's status.
func concurrentFirstRequests(s *server, id string) (int32, []int) {
	var checks atomic.Int32
	release := make(chan struct{})
	s.soundness.verify = func(tx *store.Tx, run string) (bool, error) {
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
			s.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/api/v1/runs/"+id+"/frontier", nil))
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

// A check that outlasts Options.CheckWait (a big file not in the page
// cache took five minutes) does not hold its requests past the server's
// write timeout: each answers 503 "checking" with Retry-After, naming the
// run, while the one check goes on apart from them; once it has ended,
// the run is answered at once.
func TestALongCheckAnswersChecking(t *testing.T) {
	db := storetest.Open(t)
	createEmptyRun(t, db, "r")
	h, err := NewHandler(db, Options{CheckWait: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := h.(*server)
	var checks atomic.Int32
	release := make(chan struct{})
	var releaseOnce sync.Once
	// Also when the test fails: the check's read transaction would keep the
	// store from closing.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	s.soundness.verify = func(tx *store.Tx, run string) (bool, error) {
		if run == "r" {
			checks.Add(1)
			<-release
		}
		return verifyRun(tx, run)
	}
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/api/v1/runs/r/frontier", nil))
		return w
	}
	for i := range 3 {
		w := get()
		if body := w.Body.String(); w.Code != http.StatusServiceUnavailable || !strings.Contains(body, `"code":"checking"`) ||
			!strings.Contains(body, `run \"r\" is being checked`) || w.Header().Get("Retry-After") == "" {
			t.Fatalf("request %d while the check runs: %d %q %s, want 503 checking naming the run, with Retry-After", i, w.Code, w.Header().Get("Retry-After"), body)
		}
	}
	releaseOnce.Do(func() { close(release) })
	deadline := time.Now().Add(10 * time.Second)
	for w := get(); w.Code != http.StatusOK; w = get() {
		if w.Code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after the check: %d %s, want 200", w.Code, w.Body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := checks.Load(); n != 1 {
		t.Errorf("%d checks of the run, want 1", n)
	}
}

// A check that panics (a fault in the store on a page no walk foresaw)
// runs apart from any request, where a panic would end the process: it is
// that run's 500, and the server goes on serving the others.
func TestAPanickingCheckIsThatRunsError(t *testing.T) {
	db := storetest.Open(t)
	createEmptyRun(t, db, "r")
	createEmptyRun(t, db, "q")
	h, err := NewHandler(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := h.(*server)
	s.soundness.verify = func(tx *store.Tx, run string) (bool, error) {
		if run == "r" {
			panic("a fault in the check")
		}
		return verifyRun(tx, run)
	}
	get := func(run string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/api/v1/runs/"+run+"/frontier", nil))
		return w
	}
	if w := get("r"); w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), "a fault in the check") {
		t.Errorf("GET r's frontier: %d %s, want 500 naming the panic", w.Code, w.Body)
	}
	if w := get("q"); w.Code != http.StatusOK {
		t.Errorf("GET q's frontier: %d %s, want 200", w.Code, w.Body)
	}
}

// A run that checked clean is trusted from then on: the requests after
// the first run no check of their own.
func TestACleanRunIsCheckedOnce(t *testing.T) {
	s, _ := handlerWithRun(t, "r")
	var checks atomic.Int32
	s.soundness.verify = func(tx *store.Tx, run string) (bool, error) {
		if run == "r" {
			checks.Add(1)
		}
		return verifyRun(tx, run)
	}
	for i := range 3 {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1/api/v1/runs/r/frontier", nil))
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
	}
	if n := checks.Load(); n != 1 {
		t.Errorf("%d checks for three requests, one after another; want 1", n)
	}
}

// A page of the runs bucket that points back at itself would loop every
// listing of the runs: the list of runs and every run's request answer
// 500 "damaged" naming the list of runs, at once and again (the check is
// remembered), instead of hanging the server.
func TestALoopingRunsPageAnswersDamaged(t *testing.T) {
	const pageSize = 1024
	path := filepath.Join(t.TempDir(), "patr.db")
	o := storetest.Options()
	o.PageSize = pageSize
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 { // enough run headers for the runs bucket to need a branch page
		createEmptyRun(t, db, fmt.Sprintf("run-with-a-longish-name-%02d", i))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e := loopedEnv(t, path, pageSize, "runs")
	for _, p := range []string{"/api/v1/runs", "/api/v1/runs/run-with-a-longish-name-59/frontier", "/api/v1/runs"} {
		st, _, body := e.call(http.MethodGet, p, nil)
		if st != http.StatusInternalServerError || !strings.Contains(string(body), `"damaged"`) || !strings.Contains(string(body), "the list of runs is damaged") {
			t.Errorf("GET %s: %d %s, want 500 damaged naming the list of runs", p, st, body)
		}
	}
}
