package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The group, node and trajectory endpoints read a run they have not
// checked through store.CheckedRun, and the run's summary and the step
// figures check only the records they read: on a file whose first group
// has a damaged node record, the latest group, one of its nodes, a
// trajectory, the run's summary, the list of runs and the viewer's run
// page answer exactly as on the undamaged file, before and after the
// whole-run check of another endpoint found the damage; the damaged group
// answers 500 "damaged".
func TestCheckedEndpointsAnswerWhatIsSound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patr.db")
	o := storetest.Options()
	o.PageSize = 1024
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	var first, latest model.Group
	var leaf uint64
	for step := uint64(1); step <= 10; step++ {
		err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run("r")
			if err != nil {
				r, err = tx.CreateRun("r", nil, nil)
			}
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
			if err := r.AppendTurns(root.ID, 0, turn("a", 0), turn("b", 0)); err != nil {
				return err
			}
			for i := range 3 {
				n, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Parent: root.ID, Fork: 2, Ordinal: i})
				if err != nil {
					return err
				}
				if err := r.AppendTurns(n.ID, 0, turn("c", 1)); err != nil {
					return err
				}
				if err := r.SetNodeStatus(n.ID, model.NodeCompleted); err != nil {
					return err
				}
				leaf = n.ID
			}
			if err := r.SetNodeStatus(root.ID, model.NodeExpanded); err != nil {
				return err
			}
			if err := r.CloseGroup(g.Step, g.ID); err != nil { // so the batch has rows
				return err
			}
			if latest, err = r.GroupAt(g.Step, g.ID); step == 1 {
				first = latest
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		fmt.Sprintf("/api/v1/runs/r/groups/%d", latest.ID),
		fmt.Sprintf("/api/v1/runs/r/nodes/%d", leaf),
		fmt.Sprintf("/api/v1/runs/r/nodes/%d/trajectory", leaf),
		"/api/v1/runs/r",            // the summary: the run record and its counters
		"/api/v1/runs/r?steps=true", // and each step's
		"/api/v1/runs",
		// The viewer's run page: the step figures (the event log and the
		// advantage records), the summary's, the rubrics, the latest
		// step's groups and one group's tree, and a trajectory.
		"/api/v1/runs/r/steps",
		"/api/v1/runs/r/env-steps",
		"/api/v1/runs/r/rubrics/page",
		fmt.Sprintf("/api/v1/runs/r/steps/%d/groups", latest.Step),
		fmt.Sprintf("/api/v1/runs/r/groups/%d/view", latest.ID),
		fmt.Sprintf("/api/v1/runs/r/nodes/%d/view", leaf),
		// A trainer's batch of the latest step.
		fmt.Sprintf("/api/v1/runs/r/steps/%d/batch", latest.Step),
	}
	answers := func(path string) map[string]string {
		db, err := store.Open(path, storetest.Options())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		e := newEnvDB(t, db, Options{})
		out := map[string]string{}
		for _, p := range paths {
			st, _, body := e.call(http.MethodGet, p, nil)
			out[p] = fmt.Sprintf("%d %s", st, body)
		}
		return out
	}
	clean := answers(path)
	if b := clean[fmt.Sprintf("/api/v1/runs/r/steps/%d/batch", latest.Step)]; !strings.HasPrefix(b, "200 ") || !strings.Contains(b, "input_ids") {
		t.Fatalf("the clean file's batch: %.120q, want a safetensors file with input_ids", b)
	}

	// Flip a byte of the first group's root record.
	e := damagedEnv(t, path, "nodes", []byte{0, 0, 0, 0, 0, 0, 0, byte(first.Roots[0])}, 2, 0x20)
	var checks atomic.Int32
	e.srv.Config.Handler.(*server).soundness.verify = func(tx *store.Tx, id string) (bool, error) {
		if id == "r" {
			checks.Add(1)
		}
		return verifyRun(tx, id)
	}
	for round, whole := range []string{"", "/api/v1/runs/r/frontier"} {
		// The damage is found once, remembered, and named with the next step.
		for range round * 2 {
			if st, _, body := e.call(http.MethodGet, whole, nil); st != http.StatusInternalServerError ||
				!bytes.Contains(body, []byte(`"damaged"`)) || !bytes.Contains(body, []byte(`run \"r\" is damaged`)) ||
				!bytes.Contains(body, []byte("patrdb check")) {
				t.Fatalf("GET %s: %d %s, want 500 damaged, naming the run and patrdb check", whole, st, body)
			}
		}
		for _, p := range paths {
			st, _, body := e.call(http.MethodGet, p, nil)
			if got := fmt.Sprintf("%d %s", st, body); got != clean[p] {
				t.Errorf("round %d GET %s: %.200s\nwant %.200s", round, p, got, clean[p])
			}
		}
		for _, p := range []string{
			fmt.Sprintf("/api/v1/runs/r/groups/%d", first.ID),
			fmt.Sprintf("/api/v1/runs/r/groups/%d/view", first.ID),
			fmt.Sprintf("/api/v1/runs/r/steps/%d/groups", first.Step),
			fmt.Sprintf("/api/v1/runs/r/steps/%d/batch", first.Step),
		} {
			// Damaged, with the next step: patrdb check on a copy.
			if st, _, body := e.call(http.MethodGet, p, nil); st != http.StatusInternalServerError || !bytes.Contains(body, []byte(`"damaged"`)) ||
				!bytes.Contains(body, []byte("patrdb check")) {
				t.Errorf("round %d GET %s: %d %s, want 500 damaged, naming patrdb check", round, p, st, body)
			}
		}
		// The narrow reads ran no whole-run check of their own.
		if n := checks.Load(); n != int32(round) {
			t.Errorf("round %d: %d whole-run checks, want %d", round, n, round)
		}
	}
}

// A run whose counters record is damaged: its summary answers 500
// "damaged" and the list of runs names it damaged and goes on, while a
// group of the run, which the counters do not hold, still reads.
func TestDamagedCountersAnswerDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patr.db")
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	var g model.Group
	for steps, run := range []string{"a", "r"} { // one step for a, two for r: r's totals are its own
		if err := db.Update(func(tx *store.Tx) error {
			r, err := tx.CreateRun(run, nil, nil)
			if err != nil {
				return err
			}
			for step := uint64(1); step <= uint64(steps+1); step++ {
				if g, err = r.OpenGroup(store.GroupSpec{Step: step, Task: "t"}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e := damagedEnv(t, path, "counts", make([]byte, 8), 6, 0x01) // the run's totals
	if st, _, body := e.call(http.MethodGet, "/api/v1/runs/r", nil); st != http.StatusInternalServerError || !bytes.Contains(body, []byte(`"damaged"`)) {
		t.Errorf("GET /api/v1/runs/r: %d %s, want 500 damaged", st, body)
	}
	var list struct {
		Runs []struct {
			Run     struct{ ID string }
			Damaged string
		}
	}
	e.get("/api/v1/runs", &list)
	if len(list.Runs) != 2 || list.Runs[0].Run.ID != "a" || list.Runs[0].Damaged != "" ||
		list.Runs[1].Run.ID != "r" || !strings.Contains(list.Runs[1].Damaged, "is damaged") {
		t.Errorf("run list: %+v", list)
	}
	if st, _, body := e.call(http.MethodGet, fmt.Sprintf("/api/v1/runs/r/groups/%d", g.ID), nil); st != http.StatusOK {
		t.Errorf("GET the run's group: %d %s, want 200", st, body)
	}
}

// damagedEnv flips bits mask of byte at of the value of key in run r's
// bucket name, in the closed file at path, and serves the file.
func damagedEnv(t *testing.T, path, name string, key []byte, at int, mask byte) *testEnv {
	t.Helper()
	off := storetest.ValueAt(t, path, "r", name, key)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[off+at] ^= mask
	return serveBytes(t, path, raw)
}

// serveBytes writes raw to path and serves the file.
func serveBytes(t *testing.T, path string, raw []byte) *testEnv {
	t.Helper()
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWithin(t, "the store", func() { db.Close() }) })
	return newEnvDB(t, db, Options{})
}

// loopedEnv serves a copy of the closed file src (pages of pageSize bytes)
// in which the last child pointer of the root page of the bucket at path
// (names from the file's top) names that root itself: a cursor that
// follows it never ends. The root must be a branch page.
func loopedEnv(t *testing.T, src string, pageSize int, path ...string) *testEnv {
	t.Helper()
	bdb, err := bolt.Open(src, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root int
	_ = bdb.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(path[0]))
		for _, name := range path[1:] {
			b = b.Bucket([]byte(name))
		}
		root = int(b.Root()) * pageSize
		return nil
	})
	bdb.Close()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if flags := binary.NativeEndian.Uint16(raw[root+8:]); flags != 0x01 {
		t.Fatalf("the root of %v is not a branch page (flags %#x): give the file more records", path, flags)
	}
	end := int(binary.NativeEndian.Uint16(raw[root+10:])) - 1
	binary.NativeEndian.PutUint64(raw[root+16+16*end+8:], uint64(root/pageSize))
	return serveBytes(t, filepath.Join(t.TempDir(), "loop.db"), raw)
}
