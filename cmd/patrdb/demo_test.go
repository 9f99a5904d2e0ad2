package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"github.com/patrdb/patrdb/batch/batchdb"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/store"
)

// demoArgs is a small fixed-seed, non-slippery demo: deterministic, so an
// interrupted and resumed run must equal an uninterrupted one.
func demoArgs(db string, extra ...string) []string {
	return append([]string{"demo", "--db", db, "--run", "demo", "--steps", "5", "--batch", "4", "--seed", "7"}, extra...)
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestDemoJSONReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patr.db")
	out, stderr, code := runCLI(t, demoArgs(path, "--json")...)
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, stderr)
	}
	var rep demoOutput
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("demo --json is not one JSON object: %v\n%s", err, out)
	}
	if len(rep.Runs) != 1 || rep.Runs[0].Steps != 5 || rep.Runs[0].Nodes == 0 || rep.Runs[0].Leaves == 0 || rep.Bytes == 0 {
		t.Fatalf("report = %+v", rep)
	}
	// The policy answers a batch of branches per call: every branch that
	// needs a turn, across the step's groups.
	if r := rep.Runs[0]; r.PolicyCalls == 0 || r.MaxBatch < 4 || r.PolicyCalls*2 > r.EnvSteps {
		t.Errorf("policy calls %d, largest batch %d for %d env steps: not batched", r.PolicyCalls, r.MaxBatch, r.EnvSteps)
	}
	if _, stderr, code := runCLI(t, "check", "--db", path); code != 0 {
		t.Fatalf("check after demo: exit %d: %s", code, stderr)
	}
	// A second fresh run under the same id is refused, and the file keeps
	// its bytes.
	before, _ := os.ReadFile(path)
	if _, stderr, code := runCLI(t, demoArgs(path)...); code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--resume") {
		t.Fatalf("duplicate run: exit %d, stderr %q", code, stderr)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("refused demo changed the file")
	}
}

func TestDemoBadFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patr.db")
	for _, args := range [][]string{
		{"demo", "--db", path, "--mode", "tree"},
		{"demo", "--db", path, "--map", "5x5"},
		{"demo", "--db", path, "--steps", "0"},
		{"demo", "--db", path, "--run", "bad id"},
		{"demo", "--db", path, "--mode", "both", "--resume"},
		{"demo", "--db", path, "--budget", "-1"},
		{"demo", "--db", path, "--discount", "0"},
		{"demo", "--db", path, "--discount", "1.5"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "patrdb: ") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("bad flags created %s", path)
	}
}

// TestDemoBudgetIsExact: with --budget every run of --mode both plays
// exactly that many env steps, though PaTR and GRPO steps differ in size.
func TestDemoBudgetIsExact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "patr.db")
	out, stderr, code := runCLI(t, "demo", "--db", path, "--mode", "both", "--budget", "700", "--batch", "4", "--seeds", "2", "--json")
	if code != 0 {
		t.Fatalf("demo exit %d: %s", code, stderr)
	}
	var rep demoOutput
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 4 || len(rep.Summary) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	for _, r := range rep.Runs {
		if r.EnvSteps != 700 {
			t.Errorf("run %s played %d env steps, want exactly 700", r.Run, r.EnvSteps)
		}
	}
	for _, s := range rep.Summary {
		if s.Budget != 700 {
			t.Errorf("summary %+v: budget %v, want 700", s, s.Budget)
		}
	}
}

// fingerprint summarises everything a run wrote that must not depend on
// whether it was interrupted: every node, advantage and checkpoint.
func fingerprint(t *testing.T, path string) (string, map[string]int) {
	t.Helper()
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if vs, err := db.Check(nil); err != nil || len(vs) != 0 {
		t.Fatalf("check: %v %v", err, vs)
	}
	var b strings.Builder
	counts := map[string]int{}
	err = db.ViewRun("demo", func(r *store.RunTx) error {
		info, err := r.Info()
		if err != nil {
			return err
		}
		counts["steps"] = int(info.LastStep)
		fmt.Fprintf(&b, "run %s last %d\n", info.Status, info.LastStep)
		groups, err := r.Groups(0)
		if err != nil {
			return err
		}
		for _, g := range groups {
			counts["groups"]++
			fmt.Fprintf(&b, "group %d step %d %s roots %v interval %d\n", g.ID, g.Step, g.Status, g.Roots, g.Interval)
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				counts["nodes"]++
				counts["turns"] += n.Turns
				if n.Status.Leaf() {
					counts["leaves"]++
				}
				fmt.Fprintf(&b, "node %d p %d f %d %s t %d r %v s %v d %v\n", n.ID, n.Parent, n.Fork, n.Status, n.Turns, n.Reward, n.Scores, n.Decisions)
			}
		}
		advs, err := r.Advantages(0, 0)
		for _, a := range advs {
			fmt.Fprintf(&b, "adv %d %d %d %v %v\n", a.Step, a.Group, a.Leaf, a.Outcome, a.Advantage)
		}
		rubrics, err := r.Rubrics("")
		if err != nil {
			return err
		}
		for _, rb := range rubrics {
			counts["rubrics"]++
			fmt.Fprintf(&b, "rubric %d %s %q parents %v into %d support %d usage %+v retired %d %q\n", rb.ID, rb.Pool, rb.Text,
				rb.Parents, rb.MergedInto, rb.Support, rb.Usage, rb.RetireStep, rb.RetireReason)
		}
		for s := uint64(1); s <= info.LastStep; s++ {
			ck, err := r.Checkpoint(s)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "ckpt %d %x\n", ck.Step, ck.Inline)
			// The training batch a trainer reads after the step, byte for byte.
			for _, l := range []batch.Layout{batch.Rows, batch.Tree} {
				bt, err := batchdb.Read(r, s, batch.Options{Layout: l})
				if err != nil {
					return err
				}
				h := sha256.New()
				if _, err := bt.WriteTo(h); err != nil {
					return err
				}
				fmt.Fprintf(&b, "batch %d %s %x\n", s, l, h.Sum(nil))
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), counts
}

// TestDemoCrashChild is the child of TestDemoCrashResume: it runs the demo
// it is given and is killed at a random point.
func TestDemoCrashChild(t *testing.T) {
	args := os.Getenv("PATRDB_DEMO_CHILD")
	if args == "" {
		t.Skip("child process of TestDemoCrashResume")
	}
	os.Exit(run(strings.Split(args, "\x1f"), strings.NewReader(""), os.Stdout, os.Stderr))
}

// TestDemoCrashResume kills a demo child with SIGKILL at random points;
// after each kill `check` is clean and `demo --resume` finishes the run with
// exactly the trees, advantages and checkpoints of an uninterrupted run.
func TestDemoCrashResume(t *testing.T) { testDemoCrashResume(t, 20, 5) }

// TestDemoCrashResumeRubrics does the same with the ARBOR rubric buffer on:
// after resume the pools and their usage statistics equal an uninterrupted
// run's.
func TestDemoCrashResumeRubrics(t *testing.T) { testDemoCrashResume(t, 8, 5, "--rubrics") }

// TestDemoCrashResumeBudget does the same with a budget that runs out in
// the middle of step 4: a resumed run refuses exactly the moves an
// uninterrupted one refused.
func TestDemoCrashResumeBudget(t *testing.T) { testDemoCrashResume(t, 8, 4, "--budget", "800") }

func testDemoCrashResume(t *testing.T, iters, steps int, flags ...string) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.db")
	start := time.Now()
	if _, stderr, code := runCLI(t, demoArgs(ref, flags...)...); code != 0 {
		t.Fatalf("reference demo: exit %d: %s", code, stderr)
	}
	full := time.Since(start)
	want, counts := fingerprint(t, ref)
	if counts["steps"] != steps || counts["nodes"] == 0 || (slices.Contains(flags, "--rubrics") && counts["rubrics"] == 0) {
		t.Fatalf("reference counts %v", counts)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	seed := rng.Int63()
	t.Logf("crash seed %d, uninterrupted demo took %v", seed, full)
	rng = rand.New(rand.NewSource(seed))
	killed := 0
	// Delays are drawn from how long a child takes. The in-process
	// reference is only a first guess: a child pays process start-up on
	// top, and on a shared machine the reference may have run in a busy
	// moment and the children in a quiet one, so a child that finishes
	// before its kill bounds the later delays by its own time.
	span := full + 100*time.Millisecond
	for i := 0; i < iters; i++ {
		path := filepath.Join(dir, fmt.Sprintf("crash-%d.db", i))
		delay := time.Duration(rng.Int63n(int64(span)))
		cmd := exec.Command(os.Args[0], "-test.run=^TestDemoCrashChild$")
		cmd.Env = append(os.Environ(), "PATRDB_DEMO_CHILD="+strings.Join(demoArgs(path, flags...), "\x1f"))
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err == nil {
				span = min(span, time.Since(began))
			}
		case <-time.After(delay):
			_ = cmd.Process.Kill()
			<-done
			killed++
		}
		st, err := os.Stat(path)
		if err != nil {
			continue // killed before the file existed: nothing to resume
		}
		// Killed between bbolt creating the file and patrdb's first commit,
		// the file is empty (not a patrdb file yet) or a bbolt file without
		// buckets (which checks clean: a new, empty patrdb file), and
		// resume starts afresh.
		if _, stderr, code := runCLI(t, "check", "--db", path); st.Size() > 0 && code != 0 {
			t.Fatalf("iteration %d (seed %d, delay %v): check after kill: exit %d: %s", i, seed, delay, code, stderr)
		}
		args := demoArgs(path, append([]string{"--resume"}, flags...)...)
		if _, stderr, code := runCLI(t, args...); code != 0 {
			if !strings.Contains(stderr, "not found") {
				t.Fatalf("iteration %d (seed %d): resume: exit %d: %s", i, seed, code, stderr)
			}
			// Killed before the run's first commit: start it afresh.
			if _, stderr, code := runCLI(t, demoArgs(path, flags...)...); code != 0 {
				t.Fatalf("iteration %d: fresh demo after early kill: exit %d: %s", i, code, stderr)
			}
		}
		got, _ := fingerprint(t, path)
		if got != want {
			t.Fatalf("iteration %d (seed %d, delay %v): resumed run differs from the uninterrupted one\n%s", i, seed, delay, firstDiff(want, got))
		}
	}
	t.Logf("%d iterations, %d killed mid-run", iters, killed)
	if killed < iters/4 {
		t.Errorf("only %d of %d children were killed before finishing; the delays are too long", killed, iters)
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n want %s\n got  %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}
