package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// hangLimit is how long one command may take on a damaged file before it
// counts as hung.
const hangLimit = 10 * time.Second

// cliChild runs the CLI in a child process (the test binary, see TestMain)
// with the fixed clock, so that a crash or a hang is observed instead of
// taking the test down. hung reports that it was killed after limit.
func cliChild(t *testing.T, limit time.Duration, args ...string) (r result, hung bool) {
	t.Helper()
	// The plain binary is built (once, maybe for tens of seconds on a
	// loaded machine with a cold cache) before the child's clock starts:
	// the limit is for the child alone.
	bin := plainBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = []string{cliChildEnv + "=1"}
	if bin != "" {
		cmd = exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{} // read commands use neither the clock nor the environment
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r = result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return r, true
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return r, false
}

var plain struct {
	once sync.Once
	dir  string
	bin  string
}

// plainBinary is, under -race, patrdb built without it, so that the
// hundreds of children the damage tests start stay cheap (the crash and
// hang checks do not need the race detector; the in-process tests have
// it). "" means: use this test binary.
func plainBinary(t *testing.T) string {
	if !raceEnabled {
		return ""
	}
	plain.once.Do(func() {
		dir, err := os.MkdirTemp("", "patrdb-plain-")
		if err != nil {
			return
		}
		bin := filepath.Join(dir, "patrdb")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			t.Logf("building patrdb without -race failed, children run the race binary: %v\n%s", err, out)
			os.RemoveAll(dir)
			return
		}
		plain.dir, plain.bin = dir, bin
	})
	return plain.bin
}

// readCommand runs one read-only command over path in a child; export
// writes into a fresh directory, named $OUT in what it prints.
func readCommand(t *testing.T, path string, args []string) (result, bool) {
	t.Helper()
	out := ""
	full := []string{"--db", path}
	for _, a := range args {
		if strings.Contains(a, "$OUT") && out == "" {
			var err error
			if out, err = os.MkdirTemp("", "patrdb-out-"); err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(out) // at once: a long run makes tens of thousands
		}
		full = append(full, strings.ReplaceAll(a, "$OUT", out))
	}
	if out == "" {
		out = "$OUT" // nothing to replace
	}
	r, hung := cliChild(t, hangLimit, full...)
	r.stdout = strings.ReplaceAll(r.stdout, out, "$OUT")
	r.stderr = strings.ReplaceAll(r.stderr, out, "$OUT")
	return r, hung
}

// readUndamaged runs one read command on an undamaged file: the answer
// every damaged copy is held to, so a failure or a hang (its output empty
// or cut short) ends the test instead of becoming the expected output.
func readUndamaged(t *testing.T, path string, args []string) result {
	t.Helper()
	r, hung := readCommand(t, path, args)
	switch {
	case hung:
		t.Fatalf("undamaged %s: %v hung for %v", path, args, hangLimit)
	case r.code != 0:
		t.Fatalf("undamaged %s: %v exit %d: %s", path, args, r.code, r.stderr)
	}
	return r
}

// judgeDamaged holds one command's result on a damaged copy to the rule:
// no hang, no crash, a failure is one "patrdb: " line, and exit 0 only with
// exactly the output of the undamaged file.
func judgeDamaged(t *testing.T, what string, args []string, r result, hung bool, clean result) {
	t.Helper()
	switch {
	case hung:
		t.Errorf("%s: %v hung for %v", what, args, hangLimit)
	case r.code == 0 && (r.stdout != clean.stdout || clean.code != 0):
		t.Errorf("%s: %v exit 0 with output that differs from the undamaged file:\n%s", what, args, goldenDiff(clean.stdout, r.stdout))
	case r.code != 0 && r.code != 1 && r.code != 2:
		t.Errorf("%s: %v exit %d (a crash?); stderr %.300q", what, args, r.code, r.stderr)
	case r.code != 0:
		oneErrorLine(t, r.stderr)
	}
}

// TestDamagedFixtures runs every read command on the damaged fixtures
// (the self- and parent-pointing files and the derived ones): check exits
// 1, the others exit non-zero with one line naming the damage, or print
// exactly what they print on the undamaged file (a run the damage does not
// touch); runs lists the damaged run as damaged beside the other one's
// figures. Every answer is kept in testdata/damaged_*.golden.
func TestDamagedFixtures(t *testing.T) {
	dir := t.TempDir()
	base := copyTo(t, filepath.Join(damagedDir, "base.db"), filepath.Join(dir, "base.db"))
	clean := map[string]result{}
	for _, args := range readOnlyCommands {
		clean[strings.Join(args, " ")] = readUndamaged(t, base, args)
	}
	for _, name := range append([]string{"self-pointing", "parent-pointing"}, derivedFixtures...) {
		t.Run(name, func(t *testing.T) {
			path := damagedFixture(t, dir, name)
			var log strings.Builder
			for _, args := range readOnlyCommands {
				r, hung := readCommand(t, path, args)
				judgeDamaged(t, name, args, r, hung, clean[strings.Join(args, " ")])
				switch {
				case args[0] == "check" && r.code != 1:
					t.Errorf("%v: exit %d, want 1", args, r.code)
				case (args[0] == "runs" || args[0] == "stats") && len(args) == 1 && (r.code != 2 || !damagedListing(r.stdout, "patr-4x4", "grpo-4x4")):
					t.Errorf("%v: exit %d, want 2 with grpo-4x4 listed and patr-4x4 marked damaged:\n%s", args, r.code, r.stdout)
				}
				fmt.Fprintf(&log, "$ patrdb %s\nexit %d\n%s%s\n", strings.Join(args, " "), r.code, r.stdout, r.stderr)
			}
			golden(t, "damaged_"+name, strings.ReplaceAll(log.String(), dir, "$DIR"))
		})
	}
}

// damagedFixture is a copy in dir of the damaged fixture name: a
// committed file, or base.db damaged as derivedFixtures says.
func damagedFixture(t *testing.T, dir, name string) string {
	t.Helper()
	if slices.Contains(derivedFixtures, name) {
		path := copyTo(t, filepath.Join(damagedDir, "base.db"), filepath.Join(dir, name+".db"))
		damageDerived(t, path, name)
		return path
	}
	return copyTo(t, filepath.Join(damagedDir, name+".db"), filepath.Join(dir, name+".db"))
}

// TestServeDamagedFixture: serve opens the self-pointing fixture, answers
// the damaged run with 500 "damaged", keeps serving the other run, and
// is alive (and answering) after it.
func TestServeDamagedFixture(t *testing.T) {
	for _, name := range []string{"self-pointing", "parent-pointing"} {
		t.Run(name, func(t *testing.T) {
			path := copyTo(t, filepath.Join(damagedDir, name+".db"), filepath.Join(t.TempDir(), "patr.db"))
			p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0")
			for _, c := range []struct {
				path   string
				status int
				code   string
			}{
				{"/api/v1/runs/patr-4x4", 500, "damaged"},
				{"/api/v1/runs/patr-4x4/frontier", 500, "damaged"},
				{"/api/v1/runs", 200, ""},  // lists the damaged run as such
				{"/api/v1/stats", 200, ""}, // and so does the file's statistics
				{"/api/v1/stats?run=patr-4x4", 500, "damaged"},
				{"/api/v1/runs/grpo-4x4", 200, ""},
				{"/api/v1/runs/grpo-4x4/groups", 200, ""},
				{"/api/v1/runs/patr-4x4", 500, "damaged"},
				{"/api/v1/health", 200, ""},
			} {
				var body struct {
					Code  string `json:"code"`
					Error string `json:"error"`
				}
				resp, err := http.Get(p.url + c.path)
				if err != nil {
					t.Fatalf("GET %s: %v; serve stderr: %s", c.path, err, p.stderr)
				}
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				got := resp.StatusCode
				if got != c.status || body.Code != c.code {
					t.Errorf("GET %s: %d %q (%s), want %d %q", c.path, got, body.Code, body.Error, c.status, c.code)
				}
				if c.code == "damaged" && !strings.Contains(body.Error, "patrdb check") {
					t.Errorf("GET %s: %q gives no next step", c.path, body.Error)
				}
			}
			var list struct {
				Runs []struct {
					Run     struct{ ID string }
					Damaged string
				}
			}
			if getJSON(t, p.url+"/api/v1/runs", "", &list); len(list.Runs) != 2 ||
				list.Runs[0].Run.ID != "grpo-4x4" || list.Runs[0].Damaged != "" ||
				list.Runs[1].Run.ID != "patr-4x4" || !strings.Contains(list.Runs[1].Damaged, "is damaged") {
				t.Errorf("run list: %+v", list)
			}
			var stats struct {
				Runs []struct{ Run, Damaged string }
			}
			if getJSON(t, p.url+"/api/v1/stats", "", &stats); len(stats.Runs) != 2 ||
				stats.Runs[0].Run != "grpo-4x4" || stats.Runs[0].Damaged != "" ||
				stats.Runs[1].Run != "patr-4x4" || !strings.Contains(stats.Runs[1].Damaged, "is damaged") {
				t.Errorf("the file's statistics: %+v", stats)
			}
			// The CLI through the server: the damaged run is one line and
			// exit 2, the other one reads.
			for _, list := range []string{"runs", "stats"} {
				r := cli(t, "--db", path, list, "--server", p.url)
				r.fails(t, 2, `run "patr-4x4" is damaged`, "patrdb check")
				if !damagedListing(r.stdout, "patr-4x4", "grpo-4x4") {
					t.Errorf("%s through the server printed %q", list, r.stdout)
				}
			}
			cli(t, "--db", path, "show", "patr-4x4", "--server", p.url).fails(t, 2, "damaged")
			if r := cli(t, "--db", path, "show", "grpo-4x4", "--server", p.url); r.code != 0 {
				t.Errorf("show grpo-4x4 through the server: exit %d: %s", r.code, r.stderr)
			}
			if p.cmd.ProcessState != nil {
				t.Fatalf("serve exited; stderr: %s", p.stderr)
			}
			if code := p.stop(t, os.Interrupt); code != 0 {
				t.Errorf("serve exit %d after SIGINT; stderr: %s", code, p.stderr)
			}
			if _, err := os.Stat(path + ".serve"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("serve left %s.serve behind", path)
			}
		})
	}
}

// copyTo copies the file src to dst and returns dst.
func copyTo(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestWritersRefuseTheDamagedFixtures: a writer never writes into a run
// damaged as the derived fixtures are — the library's Update returns ErrCorrupt
// naming the damage (with the events sequence at 0 it had overwritten
// event 1 and returned nil) and leaves the file as it was, and serve
// answers the write 500 "damaged" — while the file's other run takes
// writes. The answers are kept in testdata/damaged_writes.golden.
func TestWritersRefuseTheDamagedFixtures(t *testing.T) {
	dir := t.TempDir()
	src := currentFormatBase(t)
	var log strings.Builder
	// Not rubrics-leaf-short: a writer trusts its pages, and the write
	// below reads no rubric (a reader walks them: TestDamagedFixtures).
	for _, name := range derivedFixtures[:3] {
		path := copyTo(t, src, filepath.Join(dir, name+".db"))
		damageDerived(t, path, name)
		fmt.Fprintf(&log, "== %s\n", name)
		before := fileHash(t, path)
		db, err := store.Open(path, storetest.Options())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		setStatus := func(run string) error {
			return db.UpdateRun(run, func(r *store.RunTx) error {
				return r.SetRunStatus(model.RunFinished)
			})
		}
		err = setStatus("patr-4x4")
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s: library write to patr-4x4: %v, want ErrCorrupt", name, err)
		}
		fmt.Fprintf(&log, "library write to patr-4x4: %v\n", err)
		if fileHash(t, path) != before {
			t.Errorf("%s: the refused write changed the file", name)
		}
		if err := setStatus("grpo-4x4"); err != nil {
			t.Errorf("%s: library write to grpo-4x4: %v", name, err)
		}
		h, err := server.NewHandler(db, server.Options{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		for i, c := range []struct {
			run  string
			want int
		}{{"patr-4x4", 500}, {"grpo-4x4", 200}} {
			body := fmt.Sprintf(`{"status":"running","client_key":"k%d"}`, i)
			resp, err := http.Post(srv.URL+"/api/v1/runs/"+c.run+"/status", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var reply struct{ Code string }
			_ = json.NewDecoder(resp.Body).Decode(&reply)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s: POST status of %s: %d %q, want %d", name, c.run, resp.StatusCode, reply.Code, c.want)
			}
			fmt.Fprintf(&log, "POST /api/v1/runs/%s/status: %d %s\n", c.run, resp.StatusCode, reply.Code)
		}
		srv.Close()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "damaged_writes", strings.ReplaceAll(log.String(), dir, "$DIR"))
}

// currentFormatBase is the golden fixture written now with base.db's page
// size, not compacted: base.db is of format 1, which takes no writes and
// keeps no counters (so every summary of it walks the whole run).
func currentFormatBase(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src.db")
	o := storetest.Options()
	o.PageSize = damagedPageSize
	buildFixtureOpts(t, src, o)
	return src
}

// TestServeListsTheDerivedFixtures: the API's run list names the run
// damaged as the derived fixtures are and serves the other run (with a
// header of the run's at root 0 it answered 500 for every run), and the
// damaged run's summary answers 500 "damaged". The runs keep counters, so
// a summary reads only them.
func TestServeListsTheDerivedFixtures(t *testing.T) {
	dir := t.TempDir()
	src := currentFormatBase(t)
	for _, name := range derivedFixtures {
		t.Run(name, func(t *testing.T) {
			path := copyTo(t, src, filepath.Join(dir, name+".db"))
			damageDerived(t, path, name)
			o := storetest.Options()
			o.ReadOnly = true
			db, err := store.Open(path, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			h, err := server.NewHandler(db, server.Options{})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			var list struct {
				Runs []struct {
					Run struct {
						ID     string
						Status string
					}
					Damaged string
				}
			}
			if getJSON(t, srv.URL+"/api/v1/runs", "", &list); len(list.Runs) != 2 ||
				list.Runs[0].Run.ID != "grpo-4x4" || list.Runs[0].Damaged != "" || list.Runs[0].Run.Status == "" ||
				list.Runs[1].Run.ID != "patr-4x4" || !strings.Contains(list.Runs[1].Damaged, "is damaged") {
				t.Errorf("run list: %+v", list)
			}
			for path, want := range map[string]int{"/api/v1/runs/patr-4x4": 500, "/api/v1/runs/grpo-4x4": 200} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
				}
			}
		})
	}
}
