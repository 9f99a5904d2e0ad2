package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// testEnv is a store behind a real loopback HTTP server.
type testEnv struct {
	t   *testing.T
	db  *store.DB
	srv *httptest.Server
	c   *client.Client
}

func newEnv(t *testing.T, opts Options) *testEnv {
	t.Helper()
	db := storetest.Open(t)
	return newEnvDB(t, db, opts)
}

func newEnvDB(t *testing.T, db *store.DB, opts Options) *testEnv {
	t.Helper()
	h, err := NewHandler(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { closeWithin(t, "the test server", srv.Close) })
	c := client.New(srv.URL)
	c.Token = opts.Token
	return &testEnv{t: t, db: db, srv: srv, c: c}
}

// testClient sends the tests' requests. Its timeout turns a request that
// never ends (a handler looping on a damaged file, the regression several
// tests here look for) into a failure instead of a hang.
var testClient = &http.Client{Timeout: time.Minute}

// closeWithin runs shut (a test server's or a store's Close) and fails the test
// when it has not returned in 10 s, instead of hanging: a request or a
// read that loops keeps either from closing. What still runs is left
// behind.
func closeWithin(t *testing.T, what string, shut func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		shut()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not close in 10 s: a request or a read is still running", what)
	}
}

// call sends a request; body is a string (sent as is) or a value (JSON).
func (e *testEnv) call(method, path string, body any) (int, http.Header, []byte) {
	e.t.Helper()
	return e.callCT(method, path, "application/json", body)
}

func (e *testEnv) callCT(method, path, ct string, body any) (int, http.Header, []byte) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil && ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if e.c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.c.Token)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// get decodes a 200 answer into out.
func (e *testEnv) get(path string, out any) {
	e.t.Helper()
	st, _, body := e.call(http.MethodGet, path, nil)
	if st != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, st, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// post sends a write and requires the status.
func (e *testEnv) post(path string, body any, want int, out any) []byte {
	e.t.Helper()
	st, _, data := e.call(http.MethodPost, path, body)
	if st != want {
		e.t.Fatalf("POST %s: got %d, want %d: %s", path, st, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("POST %s: %v in %s", path, err, data)
		}
	}
	return data
}

// fileSum is the sha256 of the store file: a refused request must leave it
// byte for byte as it was.
func (e *testEnv) fileSum() [32]byte {
	e.t.Helper()
	b, err := os.ReadFile(e.db.Path())
	if err != nil {
		e.t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// dump renders every record of every run, events included, so two dumps
// differ exactly when something was written.
func (e *testEnv) dump() string {
	e.t.Helper()
	var buf bytes.Buffer
	err := e.db.View(func(tx *store.Tx) error {
		runs, err := tx.Runs()
		if err != nil {
			return err
		}
		for _, run := range runs {
			r, _ := tx.Run(run.ID)
			fmtJSON(&buf, run)
			if err := r.ForEachGroup(0, func(g model.Group) error {
				fmtJSON(&buf, g)
				nodes, err := r.GroupNodes(g)
				for _, n := range nodes {
					fmtJSON(&buf, n)
					turns, _ := r.Turns(n.ID)
					fmtJSON(&buf, turns)
				}
				return err
			}); err != nil {
				return err
			}
			advs, _ := r.Advantages(0, 0)
			fmtJSON(&buf, advs)
			rbs, _ := r.Rubrics("")
			fmtJSON(&buf, rbs)
			if err := r.Events(1, func(ev model.Event) error { fmtJSON(&buf, ev); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return buf.String()
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func fmtJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
	w.Write([]byte{'\n'})
}

// lastSeq is the run's last event sequence number.
func (e *testEnv) lastSeq(run string) uint64 {
	var seq uint64
	_ = e.db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err == nil {
			seq = r.LastSeq()
		}
		return nil
	})
	return seq
}

var bg = context.Background()

func ptr[T any](v T) *T { return &v }

func turn(action string, reward float64) model.Turn {
	return model.Turn{Action: action, Observation: "obs after " + action, Reward: reward,
		ActionTokens: []uint32{1, 2, 3}, ActionLogprobs: []float32{-0.5, -0.25, -1}}
}

func u64(x uint64) string { return strconv.FormatUint(x, 10) }

// createEmptyRun creates run id, with no config, in db.
func createEmptyRun(t *testing.T, db *store.DB, id string) {
	t.Helper()
	if err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(id, nil, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
