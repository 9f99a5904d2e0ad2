package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// readOnlyCommands is every command that only reads, with the arguments
// that make it read the most of the fixture.
var readOnlyCommands = [][]string{
	{"runs"}, {"runs", "--json"},
	{"show", "patr-4x4"}, {"show", "grpo-4x4", "--json"},
	{"tree", "patr-4x4", "step:1"}, {"tree", "patr-4x4", "latest", "--format", "dot"}, {"tree", "patr-4x4", "step:2", "--json"},
	{"traj", "patr-4x4", "4"}, {"traj", "patr-4x4", "11", "--json"},
	{"frontier", "patr-4x4"}, {"frontier", "patr-4x4", "--json"},
	{"rubrics", "patr-4x4"}, {"rubrics", "patr-4x4", "--lineage", "4", "--json"},
	{"adv", "patr-4x4"}, {"adv", "patr-4x4", "--step", "1", "--json"},
	{"replay", "patr-4x4"}, {"replay", "patr-4x4", "--until", "20", "--json"}, {"replay", "patr-4x4", "--what-if", "delta=0.2"},
	{"stats"}, {"stats", "patr-4x4", "--json"},
	{"export", "patr-4x4", "--format", "jsonl", "--out", "$OUT/lake"}, {"export", "patr-4x4", "--format", "parquet", "--out", "$OUT/lake"},
	{"batch", "patr-4x4", "--step", "1", "--layout", "tree", "--out", "$OUT/b.safetensors"},
	{"check"}, {"check", "--json"},
}

// expandOut replaces $OUT in args with a fresh directory, for the commands
// that write their output to files (export).
func expandOut(t *testing.T, args []string) []string {
	out := make([]string, len(args))
	dir := ""
	for i, a := range args {
		if strings.Contains(a, "$OUT") && dir == "" {
			dir = t.TempDir()
		}
		out[i] = strings.ReplaceAll(a, "$OUT", dir)
	}
	return out
}

func TestReadOnlyCommandsLeaveTheFileUnchanged(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range readOnlyCommands {
		cli(t, append([]string{"--db", path}, expandOut(t, args)...)...).ok(t)
		if fileHash(t, path) != before {
			t.Fatalf("%v changed the file's bytes", args)
		}
	}
	// Failing lookups and the source of a compaction too.
	cli(t, "--db", path, "tree", "patr-4x4", "99").fails(t, 1)
	cli(t, "--db", path, "compact", "--out", filepath.Join(t.TempDir(), "c.db")).ok(t)
	if fileHash(t, path) != before {
		t.Fatal("a failed lookup or compact changed the file")
	}
	after, _ := os.Stat(path)
	if !after.ModTime().Equal(info.ModTime()) || after.Size() != info.Size() {
		t.Errorf("file metadata changed: %v %d → %v %d", info.ModTime(), info.Size(), after.ModTime(), after.Size())
	}
}

// A file another process writes to gives, within --timeout, one line that
// names the file and says how to look at a live run.
func TestLockedFile(t *testing.T) {
	path := fixture(t)
	lockFile(t, path)
	const timeout = 200 * time.Millisecond
	cmds := append(readOnlyCommands, []string{"compact", "--out", filepath.Join(t.TempDir(), "c.db")})
	// All at once: each waits out its own timeout.
	var wg sync.WaitGroup
	for _, args := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			r := cli(t, append([]string{"--db", path, "--timeout", timeout.String()}, expandOut(t, args)...)...)
			took := time.Since(start)
			r.fails(t, 2, path, "locked by another process", "waited 200ms", "patrdb serve", "compact --out")
			if r.stdout != "" {
				t.Errorf("%v printed %q", args, r.stdout)
			}
			// It waited for the lock (bbolt polls every 50ms and stops one
			// poll early), and gave up (generous slack: shared CI).
			if took < timeout/2 || took > timeout+10*time.Second {
				t.Errorf("%v took %v with --timeout %v", args, took, timeout)
			}
		}()
	}
	wg.Wait()
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.db")
	for _, args := range readOnlyCommands {
		cli(t, append([]string{"--db", path}, expandOut(t, args)...)...).fails(t, 2, path, "does not exist")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read-only command created %s", path)
	}
}

// Not a patrdb file: every command says so in one line, none panics. (A
// file of zero bytes is a writer's first open cut short, read as new:
// fresh_test.go.)
func TestGarbageFile(t *testing.T) {
	for name, content := range map[string][]byte{
		"text":   []byte(strings.Repeat("hello\n", 10000)),
		"zeros":  make([]byte, 64<<10),
		"a dir/": nil,
	} {
		path := filepath.Join(t.TempDir(), strings.TrimSuffix(name, "/"))
		if content == nil {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		var before [32]byte
		if content != nil {
			before = fileHash(t, path)
		}
		for _, args := range readOnlyCommands {
			r := cli(t, append([]string{"--db", path}, expandOut(t, args)...)...)
			if r.code != 2 {
				t.Errorf("%s: %v: exit %d", name, args, r.code)
			}
			oneErrorLine(t, r.stderr)
		}
		if content != nil && fileHash(t, path) != before {
			t.Errorf("%s: a read-only command wrote to the file", name)
		}
	}
}

func TestBadArguments(t *testing.T) {
	path := fixture(t)
	before := fileHash(t, path)
	for _, c := range []struct {
		args []string
		frag string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"runs", "--frob"}, "unknown flag: --frob"},
		{[]string{"runs", "extra"}, "runs takes no arguments"},
		{[]string{"check", "extra"}, "check takes no arguments"},
		{[]string{"runs", "--timeout", "soon"}, `invalid argument "soon"`},
		{[]string{"runs", "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"runs", "--timeout", "0"}, "--timeout 0s"},
		{[]string{"--db", "", "runs"}, "--db is empty"},
		{[]string{"show"}, "show takes RUN"},
		{[]string{"show", "a", "b"}, "show takes RUN"},
		{[]string{"show", "../etc"}, `RUN "../etc"`},
		{[]string{"tree", "patr-4x4"}, "tree takes RUN GROUP"},
		{[]string{"tree", "patr-4x4", "first"}, `GROUP "first"`},
		{[]string{"tree", "patr-4x4", "step:0"}, `GROUP "step:0"`},
		{[]string{"tree", "patr-4x4", "1", "--format", "png"}, `--format "png"`},
		{[]string{"traj", "patr-4x4"}, "traj takes RUN NODE"},
		{[]string{"traj", "patr-4x4", "1.5"}, `NODE "1.5"`},
		{[]string{"frontier"}, "frontier takes RUN"},
		{[]string{"rubrics", "patr-4x4", "--pool", "best"}, `--pool "best"`},
		{[]string{"rubrics", "patr-4x4", "--lineage", "-3"}, `--lineage "-3"`},
		{[]string{"adv", "patr-4x4", "--step", "first"}, `--step "first"`},
		{[]string{"adv", "patr-4x4", "--step"}, "flag needs an argument"},
		{[]string{"compact"}, `required flag(s) "out" not set`},
		{[]string{"compact", "--out", path}, "already exists"},
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "patrdb completion"`},
	} {
		args := append([]string{"--db", path}, c.args...)
		if c.args[0] == "--db" {
			args = c.args
		}
		r := cli(t, args...)
		r.fails(t, 2, c.frag)
		if r.stdout != "" {
			t.Errorf("%v printed to stdout: %q", c.args, r.stdout)
		}
	}
	if fileHash(t, path) != before {
		t.Error("a bad command line changed the file")
	}
}

// notFoundCases name what does not exist in the fixture; remote_test.go
// asks a server too.
var notFoundCases = []struct {
	args []string
	frag string
}{
	{[]string{"show", "ghost"}, `run "ghost" not found`},
	{[]string{"tree", "ghost", "1"}, `run "ghost" not found`},
	{[]string{"tree", "patr-4x4", "7"}, `group 7 not found in run "patr-4x4"`},
	{[]string{"tree", "patr-4x4", "step:3"}, `step 3 of run "patr-4x4" has no groups`},
	{[]string{"traj", "ghost", "1"}, `run "ghost" not found`},
	{[]string{"traj", "patr-4x4", "13"}, `node 13 not found in run "patr-4x4"`},
	{[]string{"frontier", "ghost"}, `run "ghost" not found`},
	{[]string{"rubrics", "ghost"}, `run "ghost" not found`},
	{[]string{"rubrics", "patr-4x4", "--lineage", "7"}, `rubric 7 not found in run "patr-4x4"`},
	{[]string{"adv", "ghost"}, `run "ghost" not found`},
	{[]string{"adv", "patr-4x4", "--step", "3"}, `step 3 of run "patr-4x4" has no groups`},
	{[]string{"replay", "ghost"}, `run "ghost" not found`},
	{[]string{"replay", "patr-4x4", "--what-if", "m=3", "--step", "3"}, "no group matches --step 3"},
	{[]string{"stats", "ghost"}, `run "ghost" not found`},
}

// Unknown run, group, node, rubric or step: one line naming it, exit 1.
func TestNotFound(t *testing.T) {
	path := fixture(t)
	for _, c := range notFoundCases {
		r := cli(t, append([]string{"--db", path}, c.args...)...)
		r.fails(t, 1, c.frag)
		if r.stdout != "" {
			t.Errorf("%v printed to stdout: %q", c.args, r.stdout)
		}
	}
}

func TestCompletion(t *testing.T) {
	path := fixture(t)
	r := cli(t, "completion", "bash").ok(t)
	if !strings.Contains(r.stdout, "bash completion") || !strings.Contains(r.stdout, "__start_patrdb") {
		t.Errorf("completion bash does not look like a bash completion script:\n%.300s", r.stdout)
	}
	// The script asks the binary for candidates; RUN completes to the runs.
	r = cli(t, "--db", path, "__complete", "tree", "")
	if r.code != 0 || !strings.Contains(r.stdout, "grpo-4x4\npatr-4x4\n") {
		t.Errorf("run completion: exit %d\n%s", r.code, r.stdout)
	}
	r = cli(t, "__complete", "tree", "patr-4x4", "1", "--format", "")
	if !strings.Contains(r.stdout, "text\ndot\njson\n") {
		t.Errorf("--format completion:\n%s", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	out := cli(t, "--help").ok(t).stdout
	for _, cmd := range []string{"runs", "show", "tree", "traj", "frontier", "rubrics", "adv", "check", "compact", "completion"} {
		if !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("help does not list %s:\n%s", cmd, out)
		}
	}
	if !strings.Contains(cli(t, "tree", "--help").ok(t).stdout, "step:N") {
		t.Error("tree --help does not explain GROUP")
	}
}

func TestErrorLine(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errors.New("plain"), "patrdb: plain"},
		{fmt.Errorf("%w: run %q", model.ErrNotFound, "x"), `patrdb: not found: run "x"`},
		{errors.Join(errors.New("a"), errors.New("b")), "patrdb: a; b"},
		{usageErrorf("bad\r\nthing\n"), "patrdb: bad; thing"},
	} {
		if got := errorLine(c.err); got != c.want {
			t.Errorf("errorLine(%q) = %q, want %q", c.err, got, c.want)
		}
	}
	for _, c := range []struct {
		err  error
		code int
	}{
		{usageErrorf("x"), 2},
		{notFoundErrorf("x"), 1},
		{failedErrorf("x"), 1},
		{fmt.Errorf("%w: run", model.ErrNotFound), 1},
		{&commandError{notFoundErrorf("x")}, 1},
		{store.ErrTimeout, 2},
		{store.ErrNotPatrdb, 2},
		{store.ErrVersionMismatch, 2},
		{&store.CorruptError{Bucket: "b"}, 2},
		{errors.New("read: input/output error"), 2},
	} {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.code)
		}
	}
	if !errors.Is(notFoundErrorf("x"), model.ErrNotFound) {
		t.Error("notFoundErrorf does not match model.ErrNotFound")
	}
}

// A panic anywhere in a command (a damaged page can make bbolt panic) ends
// as one line and exit 2, never a stack trace.
func TestPanicIsOneLine(t *testing.T) {
	var out, errb strings.Builder
	code := runEnv([]string{"runs"}, env{
		stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv:     func(string) string { panic("boom\nsecond line") },
		now:        testNow,
		isTerminal: func(io.Writer) bool { return false },
	})
	if code != 2 {
		t.Errorf("exit %d", code)
	}
	oneErrorLine(t, errb.String(), "internal error: boom; second line", "patrdb check")
}
