package publish

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// writeOutput begins an output for dest and writes text into it as a file.
func writeOutput(t *testing.T, g *Guard, dest, text string) *Output {
	t.Helper()
	var o *Output
	var err error
	if g == nil {
		o, err = Begin(dest)
	} else {
		o, err = g.Begin(dest)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := o.Create(0o644)
	if err == nil {
		_, err = f.WriteString(text)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// An output is invisible at its destination until published, then whole
// there, and nothing temporary is left; a destination that exists is not
// replaced (ErrExists, which is fs.ErrExist) unless asked, and the refused
// output is removed.
func TestPublishPutsTheWholeOutputInPlace(t *testing.T) {
	dir := t.TempDir()
	dest := filepath.Join(dir, "out.bin")
	o := writeOutput(t, nil, dest, "complete")
	if _, err := os.Lstat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the destination exists before Publish: %v", err)
	}
	if names := entries(t, dir); len(names) != 1 || !strings.HasPrefix(names[0], ".out.bin.partial-") {
		t.Fatalf("while building: %v", names)
	}
	if err := o.Publish(false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dest); err != nil || string(b) != "complete" {
		t.Fatalf("published: %q, %v", b, err)
	}
	if names := entries(t, dir); !slices.Equal(names, []string{"out.bin"}) {
		t.Fatalf("after Publish: %v", names)
	}

	o = writeOutput(t, nil, dest, "second")
	if err := o.Publish(false); !errors.Is(err, ErrExists) || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Publish over an existing file: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "complete" {
		t.Fatalf("the refused output replaced the destination: %q", b)
	}
	if names := entries(t, dir); !slices.Equal(names, []string{"out.bin"}) {
		t.Fatalf("after a refused Publish: %v", names)
	}
	o = writeOutput(t, nil, dest, "replaced")
	if err := o.Publish(true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dest); string(b) != "replaced" {
		t.Fatalf("Publish(replace): %q", b)
	}

	// A folder, published whole; refused over an existing (even empty) one.
	folder := filepath.Join(dir, "lake")
	o, err := Begin(folder)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(o.Path(), "step=1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Path(), "step=1", "part-0"), []byte("p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := o.Publish(false); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(folder, "step=1", "part-0")); err != nil || string(b) != "p" {
		t.Fatalf("published folder: %q, %v", b, err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	o, err = Begin(empty)
	if err == nil {
		err = os.Mkdir(o.Path(), 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Publish(false); !errors.Is(err, ErrExists) {
		t.Fatalf("Publish over an empty folder: %v, want ErrExists", err)
	}

	o = writeOutput(t, nil, filepath.Join(dir, "dropped"), "x")
	o.Abort()
	o.Abort()
	if names := entries(t, dir); !slices.Equal(names, []string{"empty", "lake", "out.bin"}) {
		t.Fatalf("after Abort: %v", names)
	}
	if err := o.Publish(false); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Publish after Abort: %v", err)
	}
}

// holderEnv makes this test binary a child that begins an output at the
// destination it names, says "begun" and waits to be killed.
const holderEnv = "PUBLISH_TEST_HOLDER"

func TestMain(m *testing.M) {
	if dest := os.Getenv(holderEnv); dest != "" {
		o, err := Begin(dest)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		if f, err := o.Create(0o600); err == nil {
			f.WriteString("half")
		}
		os.Stdout.WriteString("begun\n")
		time.Sleep(time.Hour) // killed by the test
	}
	os.Exit(m.Run())
}

// holder starts a child process that begins an output at dest and holds
// it until killed.
func holder(t *testing.T, dest string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderEnv+"="+dest)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "begun\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	return cmd
}

// The output of a process killed with SIGKILL is removed by the next
// output begun beside it (its lock died with it); a live process's output
// is left alone; so are folders that only look like one (no lock file,
// and something in them: a shared folder's, say /tmp's, are not ours to
// empty). A folder killed before it was locked goes too, and an empty one
// whose removal was cut short after its lock file.
func TestBeginRemovesWhatKilledProcessesLeft(t *testing.T) {
	dir := t.TempDir()
	live := holder(t, filepath.Join(dir, "live.db"))
	killed := holder(t, filepath.Join(dir, "killed.db"))
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	foreign := filepath.Join(dir, ".notes.partial-1")
	foreignCreating := filepath.Join(dir, ".work.creating-1")
	halfMade := filepath.Join(dir, ".x.creating-1")
	halfRemoved := filepath.Join(dir, ".y.partial-1")
	for _, d := range []string{foreign, foreignCreating, halfMade, halfRemoved} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{foreign, foreignCreating} {
		if err := os.WriteFile(filepath.Join(d, "note"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(entries(t, dir)); n != 6 {
		t.Fatalf("before: %v", entries(t, dir))
	}
	o := writeOutput(t, nil, filepath.Join(dir, "next.db"), "x")
	if err := o.Publish(false); err != nil {
		t.Fatal(err)
	}
	var partial []string
	for _, n := range entries(t, dir) {
		if strings.Contains(n, ".partial-") || strings.Contains(n, ".creating-") {
			partial = append(partial, n)
		}
	}
	if len(partial) != 3 || !strings.HasPrefix(partial[0], ".live.db.partial-") || partial[1] != ".notes.partial-1" ||
		partial[2] != ".work.creating-1" {
		t.Fatalf("left: %v, want the live process's output and the folders without a lock", partial)
	}
	_ = live.Process.Kill()
	_ = live.Wait()
	if removed, err := Sweep(dir); err != nil || len(removed) != 1 {
		t.Fatalf("Sweep after the live process died: %v, %v", removed, err)
	}
}

// A scratch folder goes as an unpublished output does: its release removes
// it with what was put in it, the next Scratch beside it leaves a live one
// alone and removes a killed process's.
func TestScratchFoldersGoLikeOutputs(t *testing.T) {
	dir := t.TempDir()
	killed := holder(t, filepath.Join(dir, "stage"))
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	a, releaseA, err := Scratch(dir, "stage")
	if err != nil {
		t.Fatal(err)
	}
	if names := entries(t, dir); len(names) != 1 || filepath.Join(dir, names[0]) != a {
		t.Fatalf("after the first Scratch: %v, want only %s", names, a)
	}
	if err := os.MkdirAll(filepath.Join(a, "turns", "run=x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "turns", "run=x", "part.parquet"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, releaseB, err := Scratch(dir, "stage")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a, "turns", "run=x", "part.parquet")); err != nil {
		t.Fatalf("a live scratch folder was touched by the next: %v", err)
	}
	releaseA()
	if names := entries(t, dir); len(names) != 1 || filepath.Join(dir, names[0]) != b {
		t.Fatalf("after the first's release: %v, want only %s", names, b)
	}
	releaseB()
	if names := entries(t, dir); len(names) != 0 {
		t.Fatalf("after both releases: %v", names)
	}
}
