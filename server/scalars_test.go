package server

import (
	"fmt"
	"github.com/patrdb/patrdb/model"
	"math/rand"
	"net/http"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// A trainer's figures go in by POST, merged per step, and come back by GET
// in step order with the names they use; bad input is a 400 that writes
// nothing, and a retried write returns the first answer.
func TestScalarsOverHTTP(t *testing.T) {
	e := newEnv(t, Options{})
	createEmptyRun(t, e.db, "r")
	got, err := e.c.LogScalars(bg, "r", api.ScalarsRequest{Step: 2, Values: map[string]float64{"loss": 1.5, "kl": 0.01}})
	if err != nil || got.Step != 2 || got.Values["loss"] != 1.5 {
		t.Fatalf("log: %+v %v", got, err)
	}
	if _, err := e.c.LogScalars(bg, "r", api.ScalarsRequest{Keyed: api.Keyed{ClientKey: "k1"}, Step: 2,
		Values: map[string]float64{"loss": 1.25, "lr": 1e-5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.LogScalars(bg, "r", api.ScalarsRequest{Step: 5, Values: map[string]float64{"loss": 0.5}}); err != nil {
		t.Fatal(err)
	}
	seq := e.lastSeq("r")
	again, err := e.c.LogScalars(bg, "r", api.ScalarsRequest{Keyed: api.Keyed{ClientKey: "k1"}, Step: 2,
		Values: map[string]float64{"loss": 1.25, "lr": 1e-5}})
	if err != nil || again.Values["lr"] != 1e-5 || e.lastSeq("r") != seq {
		t.Fatalf("a retried write: %+v %v, log at %d (was %d)", again, err, e.lastSeq("r"), seq)
	}
	page, err := e.c.Scalars(bg, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(page.Names, []string{"kl", "loss", "lr"}) || len(page.Steps) != 2 ||
		!reflect.DeepEqual(page.Steps[0].Values, map[string]float64{"loss": 1.25, "kl": 0.01, "lr": 1e-5}) ||
		page.Steps[1].Step != 5 {
		t.Fatalf("page %+v", page)
	}
	if page, err = e.c.Scalars(bg, "r", 3); err != nil || len(page.Steps) != 1 || page.Steps[0].Step != 5 {
		t.Fatalf("from step 3: %+v %v", page, err)
	}

	sum := e.fileSum()
	for _, body := range []string{
		`{"client_key":"b1","step":0,"values":{"loss":1}}`,
		`{"client_key":"b2","step":1,"values":{}}`,
		`{"client_key":"b3","step":1,"values":{"":1}}`,
		`{"client_key":"b4","step":1,"values":{"loss":"high"}}`,
		`{"client_key":"b5","step":1,"values":{"a\u0000b":1}}`,
	} {
		status, _, reply := e.callCT("POST", "/api/v1/runs/r/scalars", "application/json", []byte(body))
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, status, reply)
		}
	}
	if status, _, _ := e.call("POST", "/api/v1/runs/nope/scalars", api.ScalarsRequest{Keyed: api.Keyed{ClientKey: "x"}, Step: 1,
		Values: map[string]float64{"loss": 1}}); status != http.StatusNotFound {
		t.Errorf("an unknown run: %d, want 404", status)
	}
	if e.fileSum() != sum {
		t.Fatal("refused writes changed the file")
	}
	var empty api.ScalarsPage
	createEmptyRun(t, e.db, "quiet")
	e.get("/api/v1/runs/quiet/scalars", &empty)
	if empty.Names == nil || empty.Steps == nil || len(empty.Steps) != 0 {
		t.Fatalf("a run without scalars: %+v, want empty lists", empty)
	}
}

// Figures logged through `patrdb serve` survive SIGKILL of the server as
// every record does: each acknowledged write is on file after the kills,
// none twice, and the file checks clean.
func TestScalarsSurviveKilledServer(t *testing.T) {
	bin := patrdbBin(t)
	path := filepath.Join(t.TempDir(), "kill.db")
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	srv := serveProc(bin, path, addr)
	startServe(t, srv)
	defer srv.kill()
	c := client.New("http://" + addr)
	c.Retries, c.Backoff = 40, 25*time.Millisecond
	if _, err := c.CreateRun(bg, api.CreateRunRequest{Keyed: api.Keyed{ClientKey: "create"}, ID: "k"}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[uint64]map[string]float64{}
	kills := 0
	writes := make(chan map[string]float64)
	for step := uint64(1); step <= 60; step++ {
		values := map[string]float64{"loss": rng.Float64(), "kl": rng.Float64() / 100}
		if step%3 == 0 {
			values = map[string]float64{"grad_norm": rng.NormFloat64()}
		}
		req := api.ScalarsRequest{Keyed: api.Keyed{ClientKey: fmt.Sprint("s", step)}, Step: 1 + step/3, Values: values}
		go func() {
			got, err := c.LogScalars(bg, "k", req)
			if err != nil {
				t.Errorf("step %d: %v", req.Step, err)
			}
			writes <- got.Values
		}()
		if rng.Intn(4) == 0 {
			time.Sleep(time.Duration(rng.Intn(3000)) * time.Microsecond)
			srv.kill()
			kills++
			startServe(t, srv)
		}
		got := <-writes
		for k, v := range values {
			if got[k] != v {
				t.Fatalf("the answer to step %d's write has %s=%v, want %v", req.Step, k, got[k], v)
			}
		}
		if acked[req.Step] == nil {
			acked[req.Step] = map[string]float64{}
		}
		for k, v := range values {
			acked[req.Step][k] = v
		}
	}
	srv.kill()
	if kills == 0 {
		t.Fatal("nothing was killed")
	}
	out, err := exec.Command(bin, "--db", path, "check").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("check after %d kills: %v: %s", kills, err, out)
	}
	db := storetest.OpenPath(t, path, storetest.Options())
	err = db.View(func(tx *store.Tx) error {
		r, err := tx.Run("k")
		if err != nil {
			return err
		}
		n := 0
		if err := r.ForEachScalars(0, func(s model.Scalars) error {
			n++
			if !reflect.DeepEqual(s.Values, acked[s.Step]) {
				return fmt.Errorf("step %d on file: %v, acknowledged %v", s.Step, s.Values, acked[s.Step])
			}
			return nil
		}); err != nil {
			return err
		}
		if n != len(acked) {
			return fmt.Errorf("%d steps on file, %d acknowledged", n, len(acked))
		}
		events := 0
		err = r.Events(0, func(e model.Event) error {
			if e.Kind == model.EvScalars {
				events++
			}
			return nil
		})
		if err == nil && events != 60 {
			err = fmt.Errorf("%d scalars events for 60 acknowledged writes: a retry wrote twice, or a write was lost", events)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("60 writes, %d server kills", kills)
}
