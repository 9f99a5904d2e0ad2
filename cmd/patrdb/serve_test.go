package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/server"
)

// serveArgsEnv makes the test binary, re-executed as a child, run the CLI
// with the arguments it holds (separated by \x1f): a real `patrdb serve`
// process that owns the file's lock and can be stopped with a signal.
const serveArgsEnv = "PATRDB_TEST_SERVE_ARGS"

func TestServeChild(t *testing.T) {
	args := os.Getenv(serveArgsEnv)
	if args == "" {
		t.Skip("runs only as the child of a serve test")
	}
	os.Exit(run(strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr))
}

type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *bytes.Buffer
}

// startServe runs `patrdb serve args...` in a child and returns once it
// printed its address.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$")
	cmd.Env = append(os.Environ(), serveArgsEnv+"="+strings.Join(args, "\x1f"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Wait()
		t.Fatalf("serve printed %q: %v; stderr: %s", line, err, p.stderr)
	}
	i := strings.Index(line, " at http://")
	if !strings.HasPrefix(line, "serving ") || i < 0 {
		t.Fatalf("first line %q", line)
	}
	p.url = strings.TrimSpace(line[i+len(" at "):])
	go io.Copy(io.Discard, stdout)
	return p
}

// stop sends sig and returns the exit code.
func (p *serveProc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(15 * time.Second):
		t.Fatalf("serve did not stop on %v; stderr: %s", sig, p.stderr)
		return -1
	}
}

func getJSON(t *testing.T, url, token string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// The owner announces its address next to the file; a second process that
// finds the file locked reaches the run through it; a clean stop removes
// the announcement.
func TestServeIsDiscoveredWhileItOwnsTheFile(t *testing.T) {
	path := fixture(t)
	p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0")
	got, err := server.ReadAddrFile(path)
	if err != nil || got != p.url {
		t.Fatalf("address file holds %q (%v), serve printed %q", got, err, p.url)
	}
	// The file is locked: reading it directly fails within --timeout ...
	app := &App{getenv: func(string) string { return "" }, dbPath: path, timeout: 300 * time.Millisecond}
	if db, err := app.openRead(); err == nil {
		db.Close()
		t.Fatal("the served file was not locked")
	}
	// ... but remote finds the owner by itself.
	c, err := app.remote(context.Background(), &remoteFlags{})
	if err != nil || c == nil || c.Base != p.url {
		t.Fatalf("remote: %v, %v", c, err)
	}
	runs, err := c.Runs(context.Background())
	if err != nil || len(runs) != 2 || runs[0].Run.ID != "grpo-4x4" || runs[1].Run.ID != "patr-4x4" {
		t.Fatalf("runs through the server: %+v %v", runs, err)
	}
	// A missing run maps to the CLI's not-found exit code.
	_, err = c.Run(context.Background(), "nope")
	if code := exitCode(app.remoteError(c, err)); code != exitFail {
		t.Fatalf("not found through the server: exit %d (%v)", code, err)
	}
	// The viewer is served too.
	if st := getJSON(t, p.url+"/api/v1/health", "", nil); st != 200 {
		t.Fatalf("health: %d", st)
	}

	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("serve exited %d on SIGINT: %s", code, p.stderr)
	}
	if _, err := os.Stat(server.AddrFile(path)); !os.IsNotExist(err) {
		t.Fatalf("address file left behind: %v", err)
	}
	if c, err := app.remote(context.Background(), &remoteFlags{}); c != nil || err != nil {
		t.Fatalf("remote after stop: %v %v", c, err)
	}
	if db, err := app.openRead(); err != nil {
		t.Fatalf("the file after serve stopped: %v", err)
	} else {
		db.Close()
	}
}

// A stale announcement (the owner was killed) is ignored: the command falls
// back to the file.
func TestStaleAddressFileIsIgnored(t *testing.T) {
	path := fixture(t)
	p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0")
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	if _, err := os.Stat(server.AddrFile(path)); err != nil {
		t.Fatal("kill -9 should leave the address file behind")
	}
	app := &App{getenv: func(string) string { return "" }, dbPath: path, timeout: 300 * time.Millisecond}
	if c, err := app.remote(context.Background(), &remoteFlags{}); c != nil || err != nil {
		t.Fatalf("remote with a stale file: %v %v", c, err)
	}
}

func TestRemoteFlags(t *testing.T) {
	env := map[string]string{"PATRDB_SERVER": "http://127.0.0.1:1"}
	app := &App{getenv: func(k string) string { return env[k] }, dbPath: filepath.Join(t.TempDir(), "x.db"), timeout: time.Second}
	cmd := &cobra.Command{Use: "x"}
	rf := addRemoteFlags(app, cmd)
	if rf.server != "http://127.0.0.1:1" {
		t.Fatalf("PATRDB_SERVER not the default: %q", rf.server)
	}
	c, err := app.remote(context.Background(), rf)
	if err != nil || c == nil || c.Base != "http://127.0.0.1:1" {
		t.Fatalf("remote: %v %v", c, err)
	}
	// A refused connection is exit 2, naming the server.
	_, err = c.Runs(context.Background())
	rerr := app.remoteError(c, err)
	if exitCode(rerr) != exitUsage || !strings.Contains(rerr.Error(), "127.0.0.1:1") {
		t.Fatalf("refused: %v", rerr)
	}
	for _, bad := range []string{"127.0.0.1:7878", "ftp://x", "http://"} {
		if _, err := app.remote(context.Background(), &remoteFlags{server: bad}); exitCode(err) != exitUsage {
			t.Errorf("--server %q: %v", bad, err)
		}
	}
	if _, err := app.remote(context.Background(), &remoteFlags{server: "http://x", tokenFile: filepath.Join(t.TempDir(), "none")}); exitCode(err) != exitUsage {
		t.Errorf("missing token file: %v", err)
	}
}

// A non-loopback address needs a token file; the token then guards every
// API request.
func TestServeTokenRule(t *testing.T) {
	path := fixture(t)
	before, _ := os.ReadFile(path)
	cli(t, "--db", path, "serve", "--addr", "0.0.0.0:0").fails(t, exitUsage, "--token-file")
	cli(t, "--db", path, "serve", "--addr", ":0").fails(t, exitUsage, "loopback")
	cli(t, "--db", path, "serve", "--addr", "nonsense").fails(t, exitUsage, "--addr")
	open := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(open, []byte("0123456789abcdef-secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, "--db", path, "serve", "--addr", "0.0.0.0:0", "--token-file", open).fails(t, exitUsage, "chmod 600")
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused serve touched the file")
	}
	if _, err := os.Stat(server.AddrFile(path)); !os.IsNotExist(err) {
		t.Fatal("a refused serve announced itself")
	}

	tok := filepath.Join(t.TempDir(), "token600")
	if err := os.WriteFile(tok, []byte("0123456789abcdef-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--db", path, "serve", "--addr", "0.0.0.0:0", "--token-file", tok)
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") {
		t.Fatalf("announced %q for a wildcard bind", p.url)
	}
	if st := getJSON(t, p.url+"/api/v1/runs", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", st)
	}
	var runs struct{ Runs []api.RunSummary }
	if st := getJSON(t, p.url+"/api/v1/runs", "0123456789abcdef-secret", &runs); st != 200 || len(runs.Runs) != 2 {
		t.Fatalf("with the token: %d %+v", st, runs)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d on SIGTERM: %s", code, p.stderr)
	}
}

// serve --read-only shares the lock with other readers, refuses writes and
// announces nothing.
func TestServeReadOnly(t *testing.T) {
	path := fixture(t)
	before, _ := os.ReadFile(path)
	p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0", "--read-only")
	if _, err := os.Stat(server.AddrFile(path)); !os.IsNotExist(err) {
		t.Fatal("a read-only serve announced itself")
	}
	c := client.New(p.url)
	_, err := c.CreateRun(context.Background(), api.CreateRunRequest{ID: "new"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Fatalf("write to a read-only server: %v", err)
	}
	cli(t, "--db", path, "runs").ok(t) // a reader opens the file alongside
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("read-only serve changed the file")
	}
	_ = model.ErrNotFound
}

// serve --access-log FILE appends one line per request; the index and
// /metrics answer.
func TestServeAccessLog(t *testing.T) {
	path := fixture(t)
	logFile := filepath.Join(t.TempDir(), "access.log")
	p := startServe(t, "--db", path, "serve", "--addr", "127.0.0.1:0", "--read-only", "--access-log", logFile)
	for _, u := range []string{"/api/v1/", "/metrics", "/api/v1/runs"} {
		resp, err := http.Get(p.url + u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", u, resp.StatusCode)
		}
	}
	if code := p.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("exit %d: %s", code, p.stderr)
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	// A line is written once its request is answered, so two requests in
	// a row may log in either order.
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	text := string(b)
	if len(lines) != 3 || !strings.Contains(text, `"GET /api/v1/ HTTP/1.1" 200`) || !strings.Contains(text, `"GET /metrics HTTP/1.1" 200`) ||
		!strings.Contains(text, `"GET /api/v1/runs HTTP/1.1" 200`) {
		t.Errorf("access log:\n%s", b)
	}
	cli(t, "--db", path, "serve", "--access-log", filepath.Join(logFile, "sub")).fails(t, 2, "--access-log")
}
