package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// partsFile writes run r: steps groups of a root and two completed
// leaves with rewards and advantages, closed, on pages of pageSize bytes
// (0: the default).
func partsFile(t *testing.T, steps, pageSize int) (path string, last model.Group) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "patr.db")
	o := storetest.Options()
	o.PageSize = pageSize
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	createEmptyRun(t, db, "r")
	for step := uint64(1); step <= uint64(steps); step++ {
		if err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run("r")
			if err != nil {
				return err
			}
			g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: "t"})
			if err != nil {
				return err
			}
			root, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID})
			if err != nil {
				return err
			}
			if err := r.AppendTurns(root.ID, 0, turn("a", 0)); err != nil {
				return err
			}
			for i := range 2 {
				n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Parent: root.ID, Fork: 1, Ordinal: i})
				if err != nil {
					return err
				}
				if err := r.AppendTurns(n.ID, 0, turn("b", float64(i))); err != nil {
					return err
				}
				if err := r.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
					return err
				}
				if err := r.SetReward(n.ID, float64(i)); err != nil {
					return err
				}
				if err := r.PutAdvantage(model.Advantage{Step: step, Group: g.ID, Leaf: n.ID, Outcome: float64(i), Total: float64(i), Mean: 0.5, Std: 0.5}); err != nil {
					return err
				}
			}
			if err := r.SetNodeStatus(root.ID, model.NodeExpanded); err != nil {
				return err
			}
			if err := r.CloseGroup(g.Step, g.ID); err != nil {
				return err
			}
			last, err = r.GroupAt(g.Step, g.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, last
}

// countWalks makes e's server record the parts each walk of pages covers.
func countWalks(e *testEnv) func() []store.CheckParts {
	var (
		mu    sync.Mutex
		walks []store.CheckParts
	)
	e.srv.Config.Handler.(*server).soundness.walk = func(tx *store.Tx, id string, parts store.CheckParts) error {
		mu.Lock()
		walks = append(walks, parts)
		mu.Unlock()
		return walkParts(tx, id, parts)
	}
	return func() []store.CheckParts {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(walks)
	}
}

// The step figures read the event log whole: a damaged event answers 500
// "damaged" naming the run, with no figures, while the endpoints that do
// not read the log (the steps' environment figures, one group's tree)
// answer as they did.
func TestStepFiguresCheckTheEventLog(t *testing.T) {
	path, last := partsFile(t, 3, 0)
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	var lastSeq uint64
	if err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run("r")
		if err == nil {
			lastSeq = r.LastSeq()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// The last event: earlier ones may also lie in pages freed since.
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], lastSeq)
	e := damagedEnv(t, path, "events", seq[:], 8, 0x20)
	st, _, body := e.call(http.MethodGet, "/api/v1/runs/r/steps", nil)
	if st != http.StatusInternalServerError || !bytes.Contains(body, []byte(`"damaged"`)) ||
		!bytes.Contains(body, []byte(`run \"r\" is damaged`)) || !bytes.Contains(body, []byte("runs/r/events")) ||
		!bytes.Contains(body, []byte("patrdb check")) {
		t.Errorf("GET steps: %d %s, want 500 damaged naming runs/r/events and patrdb check", st, body)
	}
	for _, p := range []string{"/api/v1/runs/r/env-steps", fmt.Sprintf("/api/v1/runs/r/groups/%d/view", last.ID)} {
		if st, _, body := e.call(http.MethodGet, p, nil); st != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", p, st, body)
		}
	}
}

// The viewer polls a live run's figures every few seconds: the pages of
// the parts it reads are walked once, and a request that needs only the
// summary's does not walk what a request before it walked.
func TestViewerPartsAreWalkedOnce(t *testing.T) {
	path, _ := partsFile(t, 2, 0)
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := newEnvDB(t, db, Options{})
	walks := countWalks(e)
	var figures struct {
		Steps []model.StepMetrics `json:"steps"`
	}
	e.get("/api/v1/runs/r/env-steps", &struct{}{})
	for range 3 {
		e.get("/api/v1/runs/r/steps", &figures)
		e.get("/api/v1/runs/r/rubrics/page", &struct{}{})
	}
	want := []store.CheckParts{store.CheckSummary, store.CheckEvents | store.CheckAdvantages}
	if got := walks(); !slices.Equal(got, want) {
		t.Errorf("walks: %#x, want %#x", got, want)
	}
	if len(figures.Steps) != 2 || figures.Steps[1].Leaves != 2 || figures.Steps[1].Success != 0.5 {
		t.Errorf("figures: %+v, want two steps of two leaves, one won", figures.Steps)
	}
}

// A page of the event log or of the advantage records that points back at
// itself would send the step figures' cursor round forever: the request
// answers 500 "damaged" naming the bucket, at once, and the viewer's reads
// that do not go through that page still answer.
func TestStepFiguresRefuseALoopingPage(t *testing.T) {
	const pageSize = 1024
	src, last := partsFile(t, 12, pageSize)
	for _, bucket := range []string{"events", "adv"} {
		t.Run(bucket, func(t *testing.T) {
			e := loopedEnv(t, src, pageSize, "runs", "r", bucket)
			done := make(chan struct{})
			go func() {
				defer close(done)
				st, _, body := e.call(http.MethodGet, "/api/v1/runs/r/steps", nil)
				if st != http.StatusInternalServerError || !bytes.Contains(body, []byte(`"damaged"`)) || !bytes.Contains(body, []byte("runs/r/"+bucket)) ||
					!bytes.Contains(body, []byte("patrdb check")) {
					t.Errorf("GET steps: %d %s, want 500 damaged naming runs/r/%s and patrdb check", st, body, bucket)
				}
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("GET steps over a looping page did not answer in 30 s")
			}
			others := []string{"/api/v1/runs/r/env-steps", "/api/v1/runs/r/rubrics/page"}
			if bucket == "events" { // a group's tree reads its advantages, not the log
				others = append(others, fmt.Sprintf("/api/v1/runs/r/groups/%d/view", last.ID))
			}
			for _, p := range others {
				if st, _, body := e.call(http.MethodGet, p, nil); st != http.StatusOK {
					t.Errorf("GET %s: %d %s, want 200", p, st, body)
				}
			}
		})
	}
}
