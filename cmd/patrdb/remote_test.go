package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// owner is a process's worth of "the trainer that owns the file": the store
// opened for writing (so the file is locked, in this process as in any
// other) and served with server.Handler on a loopback port.
type owner struct {
	db  *store.DB
	ts  *httptest.Server
	url string
}

// serveInProcess makes the test the owner of path. With announce it writes
// <db>.serve, as patrdb serve does. stop (also run at cleanup) closes the
// server and then the file, removing the announcement.
func serveInProcess(t *testing.T, path string, opts server.Options, announce bool) (*owner, func()) {
	t.Helper()
	db, err := store.Open(path, storetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{db: db}
	o.ts = httptest.NewServer(server.Handler(db, opts))
	o.url = o.ts.URL
	if announce {
		if err := server.WriteAddrFile(path, o.url); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			o.ts.Close()
			if announce {
				_ = server.RemoveAddrFile(path, o.url)
			}
			storetest.MustCheckClose(t, db)
		})
	}
	t.Cleanup(stop)
	// The file must really be locked, or the tests below would pass by
	// reading it.
	app := &App{getenv: func(string) string { return "" }, dbPath: path, timeout: 100 * time.Millisecond}
	if rdb, err := app.openRead(); err == nil {
		rdb.Close()
		t.Fatal("the owner's file is not locked")
	}
	return o, stop
}

// remoteGoldens is every golden case of a read command that can run
// through a server: all but replay --what-if, which reads the file.
func remoteGoldens() []goldenCase {
	var out []goldenCase
	for _, list := range [][]goldenCase{runsGoldens, showGoldens, treeGoldens, trajGoldens, frontierGoldens,
		rubricsGoldens, advGoldens, replayGoldens, statsGoldens} {
		for _, c := range list {
			if !slices.Contains(c.args, "--what-if") {
				out = append(out, c)
			}
		}
	}
	return out
}

// sameAsGolden requires got to be testdata/name.golden, byte for byte. It
// never rewrites the file: the goldens are the file's output.
func sameAsGolden(t *testing.T, how, name, got string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", name+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s: output differs from the file's (testdata/%s.golden):\n%s", how, name, goldenDiff(string(want), got))
	}
}

func skipOnUpdate(t *testing.T) {
	if *update {
		t.Skip("-update rewrites the goldens from the file; compare the server's output on a run without it")
	}
}

// Every read command prints exactly what it prints from the file, text and
// JSON, whether it finds the owner by itself (the file is locked and
// <db>.serve names a server of this file), is told --server URL, or reads
// $PATRDB_SERVER.
func TestRemoteGoldens(t *testing.T) {
	skipOnUpdate(t)
	path := fixture(t)
	dir := filepath.Dir(path)
	o, _ := serveInProcess(t, path, server.Options{}, true)
	elsewhere := filepath.Join(t.TempDir(), "absent.db") // --db of a client on another machine
	for _, c := range remoteGoldens() {
		t.Run(c.name, func(t *testing.T) {
			for _, v := range []struct {
				how  string
				env  map[string]string
				args []string
			}{
				{"discovered", nil, []string{"--db", path, "--timeout", "5s"}},
				{"--server", nil, []string{"--db", elsewhere, "--server", o.url}},
				{"$PATRDB_SERVER", map[string]string{"PATRDB_SERVER": o.url}, []string{"--db", elsewhere}},
			} {
				e := c.env
				e.vars = v.env
				r := cliEnv(t, e, append(v.args, c.args...)...)
				if r.code != 0 || r.stderr != "" {
					t.Errorf("%s: exit %d: %s", v.how, r.code, r.stderr)
					continue
				}
				sameAsGolden(t, v.how, c.name, strings.ReplaceAll(r.stdout, dir, "$DIR"))
			}
		})
	}
	if _, err := os.Stat(elsewhere); !os.IsNotExist(err) {
		t.Error("a command reading through --server created its --db")
	}
}

// The same through a real `patrdb serve` child process that owns the file:
// found by itself, with no flag.
func TestRemoteGoldensThroughServe(t *testing.T) {
	skipOnUpdate(t)
	path := fixture(t)
	dir := filepath.Dir(path)
	p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0")
	for _, c := range remoteGoldens() {
		r := cliEnv(t, c.env, append([]string{"--db", path, "--timeout", "5s"}, c.args...)...)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%s: exit %d: %s", c.name, r.code, r.stderr)
			continue
		}
		sameAsGolden(t, "through patrdb serve", c.name, strings.ReplaceAll(r.stdout, dir, "$DIR"))
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d: %s", code, p.stderr)
	}
}

// With the owner serving, every read command succeeds through it (check
// reads pages the API does not serve: it says the file is locked, in one
// line; export reads a consistent copy the server sends); none touches the
// file.
func TestRemoteReadOnlyCommands(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	o, stop := serveInProcess(t, path, server.Options{}, true)
	for _, args := range readOnlyCommands {
		args = expandOut(t, args)
		// A generous --timeout bounds finding the server on a loaded
		// machine; the file-only commands wait it out on the lock.
		timeout := "5s"
		if args[0] == "check" {
			timeout = "300ms"
		}
		r := cli(t, append([]string{"--db", path, "--timeout", timeout}, args...)...)
		switch {
		case args[0] == "check":
			r.fails(t, exitUsage, path, "locked by another process")
		case slices.Contains(args, "--what-if"):
			r.fails(t, exitUsage, "replay --what-if", "only the file", o.url)
		default:
			if r.code != 0 || r.stderr != "" || r.stdout == "" {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
	}
	// Shell completion of RUN asks the owner too.
	if r := cli(t, "--db", path, "--timeout", "5s", "__complete", "show", ""); !strings.Contains(r.stdout, "grpo-4x4\npatr-4x4\n") {
		t.Errorf("run completion through the server: exit %d\n%s", r.code, r.stdout)
	}
	stop()
	if fileHash(t, path) != before {
		t.Error("reading through the owner's server changed the file")
	}
}

// Without a live owner server for this file — no announcement, a stale
// one (the owner was killed), or one naming the server of another file — a
// read command of a locked file fails in one line within --timeout, as
// before.
func TestRemoteLockedWithoutServer(t *testing.T) {
	path := fixture(t)
	other, _ := serveInProcess(t, fixture(t), server.Options{}, false)
	dead := httptest.NewServer(nil)
	deadURL := dead.URL
	dead.Close()
	lockFile(t, path) // a writer that does not serve
	for _, v := range []struct{ name, announce string }{
		{"no announcement", ""},
		{"stale announcement", deadURL},
		{"another file's server", other.url},
	} {
		t.Run(v.name, func(t *testing.T) {
			if v.announce != "" {
				if err := server.WriteAddrFile(path, v.announce); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(server.AddrFile(path))
			}
			const timeout = 200 * time.Millisecond
			var wg sync.WaitGroup
			for _, args := range readOnlyCommands {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					r := cli(t, append([]string{"--db", path, "--timeout", timeout.String()}, expandOut(t, args)...)...)
					took := time.Since(start)
					r.fails(t, exitUsage, path, "locked by another process", "--server URL")
					if r.stdout != "" {
						t.Errorf("%v printed %q", args, r.stdout)
					}
					// Discovery and the lock wait each take at most --timeout.
					if took > 2*timeout+10*time.Second {
						t.Errorf("%v took %v with --timeout %v", args, took, timeout)
					}
				}()
			}
			wg.Wait()
		})
	}
}

// What does not exist is named in one line with exit 1, as from the file;
// a bad argument the server rejects is exit 2.
func TestRemoteNotFound(t *testing.T) {
	path := fixture(t)
	o, _ := serveInProcess(t, path, server.Options{}, true)
	for _, c := range notFoundCases {
		if slices.Contains(c.args, "--what-if") {
			continue
		}
		r := cli(t, append([]string{"--db", path, "--timeout", "5s"}, c.args...)...)
		r.fails(t, exitFail, c.frag)
		if r.stdout != "" {
			t.Errorf("%v printed to stdout: %q", c.args, r.stdout)
		}
	}
	cli(t, "--db", path, "show", "ghost").fails(t, exitFail, `run "ghost" not found on `+o.url)
	cli(t, "--db", path, "replay", "patr-4x4", "--until", "999").fails(t, exitUsage, "--until 999", "ends at event")
	// Nothing listens: exit 2, naming the server.
	dead := httptest.NewServer(nil)
	deadURL := dead.URL
	dead.Close()
	cli(t, "--server", deadURL, "runs").fails(t, exitUsage, "server "+deadURL)
	cli(t, "--server", "localhost:7878", "runs").fails(t, exitUsage, "--server", "want a URL")
}

// A server that wants a token gets it from --token-file (or
// $PATRDB_TOKEN_FILE); without it the command fails in one line.
func TestRemoteToken(t *testing.T) {
	skipOnUpdate(t)
	path := fixture(t)
	const token = "0123456789abcdef-secret"
	o, _ := serveInProcess(t, path, server.Options{Token: token}, false)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "--server", o.url, "--token-file", tok, "runs").ok(t)
	sameAsGolden(t, "--token-file", "runs", r.stdout)
	r = cliEnv(t, testEnv{vars: map[string]string{"PATRDB_SERVER": o.url, "PATRDB_TOKEN_FILE": tok}}, "stats", "patr-4x4", "--json").ok(t)
	sameAsGolden(t, "$PATRDB_TOKEN_FILE", "stats_json", r.stdout)
	cli(t, "--server", o.url, "runs").fails(t, exitUsage, "server "+o.url, "bearer token")
}

// On a run written by a trainer — the demo with the rubric buffer, whose
// log holds the rubric pool's own event kinds — and on a run written
// through the API (whose log holds the server's reply events), every read
// command prints through the owner's server exactly what it prints from
// the file once the owner has stopped.
func TestRemoteMatchesFileOnWrittenRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	cli(t, "demo", "--db", path, "--run", "demo", "--steps", "3", "--batch", "2", "--seed", "7", "--rubrics").ok(t)
	o, stop := serveInProcess(t, path, server.Options{}, true)

	ctx := context.Background()
	c := client.New(o.url)
	if _, err := c.CreateRun(ctx, api.CreateRunRequest{ID: "api", Tree: json.RawMessage(`{"b0":3,"k":2,"m":2,"top_expand":1,"delta":0.3}`),
		Meta: map[string]string{"who": "test <&>"}}); err != nil {
		t.Fatal(err)
	}
	os, err := c.OpenStep(ctx, "api", api.OpenStepRequest{Step: 1, Tasks: []rollout.Task{{ID: "t1", Prompt: "reach the goal"}}})
	if err != nil {
		t.Fatal(err)
	}
	og := os.Groups[0]
	ls, err := c.Lease(ctx, "api", api.LeaseRequest{Worker: "test", Step: 1})
	if err != nil {
		t.Fatal(err)
	}
	scores := []float64{0.9, 0.8, 0.1}
	var subs []rollout.Submission
	for i, l := range ls {
		turns := []model.Turn{{Action: "right", ActionTokens: []uint32{1, 2}, ActionLogprobs: []float32{-0.1, -0.7}, Observation: "at 1"},
			{Action: "down", Observation: "at 5", Reward: float64(i) / 4}}
		subs = append(subs, rollout.Submission{Lease: l.ID, Worker: l.Worker, Node: l.Node, Turns: turns, Score: &scores[i]})
	}
	rr, err := c.Submit(ctx, "api", api.SubmitRequest{Submissions: subs})
	if err != nil {
		t.Fatal(err)
	}
	if ls, err = c.Lease(ctx, "api", api.LeaseRequest{Worker: "test", Step: 1}); err != nil {
		t.Fatal(err)
	}
	one := 1.0
	for _, l := range ls {
		if l.Node != og.Roots[1] {
			continue
		}
		if _, err := c.Submit(ctx, "api", api.SubmitRequest{Submissions: []rollout.Submission{{Lease: l.ID, Worker: l.Worker, Node: l.Node, From: l.From,
			Turns: []model.Turn{{Action: "stop", Observation: "at goal", Done: true}}, Reward: &one}}}); err != nil {
			t.Fatal(err)
		}
	}

	cmds := [][]string{
		{"runs"}, {"runs", "--json"}, {"stats"}, {"stats", "--json"},
		{"show", "demo"}, {"show", "api", "--json"},
		{"tree", "demo", "step:3"}, {"tree", "demo", "latest", "--json"}, {"tree", "api", "latest", "--format", "dot"},
		{"traj", "api", fmt.Sprint(og.Roots[1]), "--json"}, {"traj", "demo", "20"},
		{"frontier", "api"}, {"frontier", "demo", "--json"},
		{"rubrics", "demo"}, {"rubrics", "demo", "--json"}, {"rubrics", "demo", "--pool", "public"},
		{"adv", "demo"}, {"adv", "demo", "--step", "1", "--json"}, {"adv", "api", "--step", "1"},
		{"replay", "demo"}, {"replay", "demo", "--json"}, {"replay", "api"}, {"replay", "api", "--json"},
		{"stats", "demo"}, {"stats", "api", "--json"},
	}
	if len(rr.Routed) == 0 || len(rr.Routed[0].Decisions) == 0 {
		t.Fatal("route decided nothing")
	}
	remote := make([]result, len(cmds))
	for i, args := range cmds {
		remote[i] = cli(t, append([]string{"--db", path, "--timeout", "5s"}, args...)...)
	}
	stop()
	for i, args := range cmds {
		local := cli(t, append([]string{"--db", path}, args...)...).ok(t)
		if remote[i].code != 0 || remote[i].stderr != "" {
			t.Errorf("%v through the server: exit %d: %s", args, remote[i].code, remote[i].stderr)
			continue
		}
		if remote[i].stdout != local.stdout {
			t.Errorf("%v: the server's output differs from the file's:\n%s", args, goldenDiff(local.stdout, remote[i].stdout))
		}
	}
	// The logs did hold what this test is about.
	replayed := cli(t, "--db", path, "replay", "demo").ok(t).stdout + cli(t, "--db", path, "replay", "api").ok(t).stdout
	for _, kind := range []string{"rubric.judge", "rubric.activate", string(model.EvReply)} {
		if !strings.Contains(replayed, kind) {
			t.Errorf("no %s event was replayed", kind)
		}
	}
}

// `patrdb batch` through the owner's server, which sends the step's
// source for the command to build the batch from, writes the file the
// command writes from the file itself, byte for byte, in both layouts.
func TestRemoteBatchIsTheFilesBatch(t *testing.T) {
	path := fixture(t)
	out := t.TempDir()
	layouts := []string{"rows", "tree"}
	for _, l := range layouts {
		cli(t, "--db", path, "batch", "patr-4x4", "--step", "2", "--layout", l, "--credit", "mean", "--out", filepath.Join(out, "local-"+l)).ok(t)
	}
	o, _ := serveInProcess(t, path, server.Options{}, true)
	elsewhere := filepath.Join(t.TempDir(), "absent.db")
	for _, l := range layouts {
		cli(t, "--db", elsewhere, "--server", o.url, "batch", "patr-4x4", "--step", "2", "--layout", l, "--credit", "mean", "--out", filepath.Join(out, "remote-"+l)).ok(t)
		local, err := os.ReadFile(filepath.Join(out, "local-"+l))
		if err != nil {
			t.Fatal(err)
		}
		remote, err := os.ReadFile(filepath.Join(out, "remote-"+l))
		if err != nil {
			t.Fatal(err)
		}
		if len(local) == 0 || !bytes.Equal(local, remote) {
			t.Errorf("%s: through the server a file of %d bytes, from the file %d", l, len(remote), len(local))
		}
	}
}
