package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/store"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// holdLockEnv makes the test binary, re-executed as a child, open the file
// it names for writing and hold it until its stdin closes.
const holdLockEnv = "PATRDB_TEST_HOLD_LOCK"

// cliChildEnv makes the test binary, re-executed as a child, be the CLI:
// its arguments are the command line. Tests that may crash or hang the
// process (damaged files, signals) run the CLI this way.
const cliChildEnv = "PATRDB_TEST_CLI"

// pauseEnv makes such a child announce "paused at POINT" on stderr and
// sleep there (App.pause), for a test to signal it mid-command.
const pauseEnv = "PATRDB_TEST_PAUSE"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdLockEnv); path != "" {
		os.Exit(holdLock(path))
	}
	if os.Getenv(cliChildEnv) != "" {
		e := env{
			stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr,
			getenv: func(string) string { return "" }, now: testNow,
			isTerminal: func(io.Writer) bool { return false },
		}
		if os.Getenv(pauseEnv) != "" {
			e.pausePoint = func(ctx context.Context, point string) {
				fmt.Fprintf(os.Stderr, "paused at %s\n", point)
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Second):
				}
			}
		}
		os.Exit(runEnv(os.Args[1:], e))
	}
	code := m.Run()
	if plain.dir != "" {
		os.RemoveAll(plain.dir)
	}
	os.Exit(code)
}

func holdLock(path string) int {
	o := store.DefaultOptions()
	o.NoSync = true
	db, err := store.Open(path, o)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 3
	}
	os.Stdout.WriteString("locked\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = db.Close()
	return 0
}

// lockFile starts a child process holding the writer's lock on path and
// returns once the lock is held; the child exits at the end of the test.
func lockFile(t *testing.T, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("lock holder: %v: %s", err, stderr.String())
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("lock holder did not lock: %q %v: %s", line, err, stderr.String())
	}
}

// result is what one CLI invocation produced.
type result struct {
	code           int
	stdout, stderr string
}

// testEnv controls what the in-process CLI sees.
type testEnv struct {
	terminal bool              // stdout counts as a terminal
	vars     map[string]string // the whole environment
}

// testNow is the clock the CLI gets in tests.
func testNow() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// cli runs the CLI in-process with an empty environment, stdout not a
// terminal, and a fixed clock.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	return cliEnv(t, testEnv{}, args...)
}

func cliEnv(t *testing.T, e testEnv, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := runEnv(args, env{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv:     func(k string) string { return e.vars[k] },
		now:        testNow,
		isTerminal: func(io.Writer) bool { return e.terminal },
	})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// ok asserts a successful run: exit 0 and nothing on stderr.
func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q; stdout:\n%s", r.code, r.stderr, r.stdout)
	}
	return r
}

// fails asserts exit code want and exactly one "patrdb: " line on stderr
// that contains every one of the fragments.
func (r result) fails(t *testing.T, want int, fragments ...string) {
	t.Helper()
	if r.code != want {
		t.Errorf("exit %d, want %d; stderr %q", r.code, want, r.stderr)
	}
	oneErrorLine(t, r.stderr, fragments...)
}

func oneErrorLine(t *testing.T, stderr string, fragments ...string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "patrdb: ") || !strings.HasSuffix(stderr, "\n") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr is not one \"patrdb: \" line: %q", stderr)
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, ".go:") {
		t.Errorf("stderr looks like a stack trace: %q", stderr)
	}
	for _, f := range fragments {
		if !strings.Contains(stderr, f) {
			t.Errorf("stderr %q does not mention %q", stderr, f)
		}
	}
}

// golden compares got with testdata/name.golden, or rewrites the file
// under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the current output (go test -update rewrites it):\n%s", path, goldenDiff(string(want), got))
	}
}

// goldenDiff shows the first line where two texts differ.
func goldenDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, w, g)
		}
	}
	return "(same lines, different line endings)"
}

// goldenCase is one command whose stdout is compared with a golden file.
type goldenCase struct {
	name string   // testdata/<name>.golden
	args []string // after --db PATH
	env  testEnv
}

// checkGoldens runs each case against a fresh fixture and compares its
// output, requiring success.
func checkGoldens(t *testing.T, cases []goldenCase) {
	t.Helper()
	db := fixture(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir() // $OUT in args: a fresh directory for files a command writes
			args := []string{"--db", db}
			for _, a := range c.args {
				args = append(args, strings.ReplaceAll(a, "$OUT", out))
			}
			r := cliEnv(t, c.env, args...).ok(t)
			got := strings.ReplaceAll(r.stdout, filepath.Dir(db), "$DIR")
			golden(t, c.name, strings.ReplaceAll(got, out, "$OUT"))
		})
	}
}

// fileHash is the SHA-256 of a file's bytes.
func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
