// Command mutate measures how well the tests pin the code: it makes one
// small deliberate bug at a time in the given files (mutants.go lists the
// kinds), runs the tests of the mutated file's package against each, and
// reports which bugs no test noticed.
//
//	go run ./tools/mutate [flags] FILE_OR_DIR[@TESTS]...
//
// TESTS, a go test -run regexp, limits the tests run against that
// target's mutants (faster; the score is then a lower bound).
// The mutated source reaches the compiler through `go test -overlay`, so
// the work tree is never written and other builds see the real code. Each
// mutant gets the package's own tests only (-short -failfast), with a
// timeout; the whole run stops at -budget, reporting what it did not reach.
// Survivors listed in -equivalent (mutants that change no behaviour) are
// shown but left out of the score.
//
// It is hand-written because go-gremlins, the Go mutation tool the module
// proxy serves, has no operator that deletes a statement (the fault that
// matters most for a checker: an invariant check no test exercises) or
// changes a constant (a tolerance), and runs each mutant in a copy of the
// module rather than through an overlay.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type result struct {
	mutant
	Status string `json:"status"`           // killed, lived, timeout, unviable, equivalent, skipped
	Reason string `json:"reason,omitempty"` // for a survivor: notCovered when no test reached it
	Secs   int    `json:"secs"`
	Tests  int    `json:"tests,omitempty"` // the tests it ran against, when chosen by coverage
}

// notCovered marks a survivor that no test executes: it was not run.
const notCovered = "not covered"

func main() {
	timeout := flag.Duration("timeout", 0, "per-mutant test timeout (0: 5x the unmutated run + 30s)")
	budget := flag.Duration("budget", 60*time.Minute, "stop testing mutants after this long; the rest are reported as skipped")
	workers := flag.Int("workers", 1, "mutants tested at once (each runs its own go test)")
	maxPer := flag.Int("max-per-file", 0, "test at most this many mutants per file, spread evenly (0: all)")
	list := flag.Bool("list", false, "list the mutants, each with its equivalent.txt key, without running anything")
	equivFile := flag.String("equivalent", "tools/mutate/equivalent.txt", "known equivalent mutants: a key as -list prints it, a tab, the reason")
	rerun := flag.String("rerun", "", "test only the mutants that lived in this earlier -json output (after adding tests)")
	jsonOut := flag.String("json", "", "also write every result to this file as JSON")
	merge := flag.Bool("merge", false, "the arguments are -json outputs: report them as one run, a later file's result for a mutant replacing an earlier one's (a -rerun after a sampled run), skipped mutants left out, equivalent.txt applied anew")
	useCover := flag.Bool("cover", true, "run each mutant against only the tests that execute its position (measured once per package with coverage), and count a mutant no test executes as survived without running it; false: every test of the package (or of @TESTS)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./tools/mutate [flags] FILE_OR_DIR[@TESTS]...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if *merge {
		equiv, err := readEquivalents(*equivFile)
		if err == nil {
			var all []result
			if all, err = mergeResults(flag.Args(), equiv); err == nil {
				report(os.Stdout, all)
				return
			}
		}
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	targets, err := sourceFiles(flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	equiv, err := readEquivalents(*equivFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	// Interrupted: the running go test is killed through the context and
	// the temp dir removed by the deferred call.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	type job struct {
		file   string
		src    []byte
		pkg    string
		runPat string
		limit  time.Duration
		m      mutant
		tests  int // chosen by coverage; -1 when no test executes the mutant
	}
	var jobs []job
	// The budget covers the coverage runs too: they are part of the
	// run's cost.
	started := time.Now()
	deadline := started.Add(*budget)
	baseline := map[string]time.Duration{}
	covs := map[string]*coverage{}
	for _, tg := range targets {
		f := tg.file
		src, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(1)
		}
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, f, src, parser.SkipObjectResolution)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(1)
		}
		ms := collect(fset, af, src, f)
		if *rerun == "" {
			ms = spread(ms, *maxPer)
		} else {
			// Not sampled again: the survivors are picked by name, so a
			// re-run finds them whatever sample the first run drew.
			if ms, err = onlyLived(*rerun, ms); err != nil {
				fmt.Fprintln(os.Stderr, "mutate:", err)
				os.Exit(2)
			}
		}
		if *list {
			for _, m := range ms {
				fmt.Printf("%s\t%s\n", m, m.Key)
			}
			continue
		}
		pkg := "./" + filepath.Dir(f)
		base := pkg + "@" + tg.runPat
		if *useCover {
			cv, ok := covs[base]
			if !ok {
				dir := filepath.Join(tmp, "cover"+strconv.Itoa(len(covs)))
				if err := os.Mkdir(dir, 0o755); err != nil {
					fmt.Fprintln(os.Stderr, "mutate:", err)
					os.Exit(1)
				}
				t0 := time.Now()
				if cv, err = measureCoverage(ctx, dir, pkg, tg.runPat, *workers); err != nil {
					fmt.Fprintln(os.Stderr, "mutate:", err)
					os.Exit(1)
				}
				covs[base] = cv
				fmt.Printf("coverage of %s: %d tests, %s\n", base, len(cv.tests), time.Since(t0).Round(time.Second))
			}
			for _, m := range ms {
				tests, d := cv.testsFor(m)
				j := job{f, src, pkg, runPattern(tests), *timeout, m, len(tests)}
				if len(tests) == 0 {
					j.tests = -1
				}
				if j.limit == 0 {
					// As without coverage: five times the normal cost
					// (here a rebuild and the chosen tests) and a margin.
					j.limit = 5*(cv.build+d) + 30*time.Second
				}
				jobs = append(jobs, j)
			}
			continue
		}
		if _, ok := baseline[base]; !ok {
			d, out, err := goTest(ctx, pkg, tg.runPat, "")
			if err != nil {
				fmt.Fprintf(os.Stderr, "mutate: the tests of %s fail without a mutant; fix them first:\n%s", pkg, out)
				os.Exit(1)
			}
			baseline[base] = d
		}
		limit := *timeout
		if limit == 0 {
			limit = 5*baseline[base] + 30*time.Second
		}
		for _, m := range ms {
			jobs = append(jobs, job{f, src, pkg, tg.runPat, limit, m, 0})
		}
	}
	if *list {
		return
	}

	fmt.Printf("%d mutants in %d files, %d at a time, budget %s\n", len(jobs), len(targets), max(*workers, 1), *budget)
	all := make([]result, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range max(*workers, 1) {
		dir := filepath.Join(tmp, strconv.Itoa(w))
		if err := os.Mkdir(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				r := result{mutant: j.m, Tests: max(j.tests, 0)}
				switch {
				case time.Now().After(deadline) || ctx.Err() != nil:
					r.Status = "skipped"
				case j.tests < 0:
					r.Status, r.Reason = "lived", notCovered
				default:
					r.Status, r.Secs = run(ctx, dir, j.pkg, j.runPat, j.file, j.src, j.m, j.limit)
				}
				if r.Status == "lived" {
					if reason, ok := equiv[j.m.Key]; ok {
						r.Status, r.Reason = "equivalent", reason
					}
				}
				mu.Lock()
				fmt.Printf("%-10s %s%s\n", strings.ToUpper(r.Status), j.m, uncoveredTag(r))
				mu.Unlock()
				all[i] = r
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()

	report(os.Stdout, all)
	fmt.Printf("took %s\n", time.Since(started).Round(time.Second))
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mutate:", err)
			os.Exit(1)
		}
	}
}

// onlyLived keeps the mutants that lived in an earlier run's JSON output.
func onlyLived(path string, ms []mutant) ([]mutant, error) {
	prev, err := readResults(path)
	if err != nil {
		return nil, err
	}
	lived := map[string]bool{}
	for _, r := range prev {
		if r.Status == "lived" {
			lived[r.mutant.String()] = true
		}
	}
	var out []mutant
	for _, m := range ms {
		if lived[m.String()] {
			out = append(out, m)
		}
	}
	return out, nil
}

// readResults reads a -json output.
func readResults(path string) ([]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []result
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rs, nil
}

// mergeResults reads -json outputs in order; a mutant's last result
// counts, and mutants a budget skipped are left out (a merge scores what
// was run). A survivor listed in equiv is equivalent, one no longer listed
// is a survivor again.
func mergeResults(paths []string, equiv map[string]string) ([]result, error) {
	at := map[string]int{}
	var all []result
	for _, p := range paths {
		rs, err := readResults(p)
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			if r.Status == "skipped" {
				continue
			}
			if r.Status == "equivalent" {
				r.Status, r.Reason = "lived", ""
			}
			if reason, ok := equiv[r.Key]; ok && r.Status == "lived" {
				r.Status, r.Reason = "equivalent", reason
			}
			k := r.mutant.String()
			if i, ok := at[k]; ok {
				all[i] = r
				continue
			}
			at[k] = len(all)
			all = append(all, r)
		}
	}
	return all, nil
}

type target struct{ file, runPat string }

// sourceFiles expands directories into their non-test Go files; a target's
// @TESTS suffix applies to each of them.
func sourceFiles(args []string) ([]target, error) {
	var out []target
	for _, a := range args {
		path, runPat, _ := strings.Cut(a, "@")
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, target{filepath.Clean(path), runPat})
			continue
		}
		ms, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, m := range ms {
			if !strings.HasSuffix(m, "_test.go") {
				out = append(out, target{m, runPat})
			}
		}
	}
	return out, nil
}

// spread keeps at most n mutants, evenly spaced so every part of the file
// is sampled: the middle one of each of n equal stretches (so a sample of
// one is not always the file's first mutant).
func spread(ms []mutant, n int) []mutant {
	if n <= 0 || len(ms) <= n {
		return ms
	}
	out := make([]mutant, 0, n)
	for i := range n {
		out = append(out, ms[(2*i+1)*len(ms)/(2*n)])
	}
	return out
}

// run tests one mutant: the mutated file goes in through an overlay.
func run(parent context.Context, tmp, pkg, runPat, file string, src []byte, m mutant, limit time.Duration) (string, int) {
	mutated := append(append(append([]byte(nil), src[:m.start]...), m.Repl...), src[m.end:]...)
	mf := filepath.Join(tmp, "mutant.go")
	abs, _ := filepath.Abs(file)
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: mf}})
	of := filepath.Join(tmp, "overlay.json")
	if os.WriteFile(mf, mutated, 0o644) != nil || os.WriteFile(of, ov, 0o644) != nil {
		return "unviable", 0
	}
	ctx, cancel := context.WithTimeout(parent, limit)
	defer cancel()
	d, out, err := goTest(ctx, pkg, runPat, of)
	secs := int(d.Round(time.Second) / time.Second)
	switch {
	case parent.Err() != nil:
		return "skipped", secs
	case ctx.Err() != nil:
		return "timeout", secs
	case err == nil:
		return "lived", secs
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return "unviable", secs
	}
	return "killed", secs
}

func goTest(ctx context.Context, pkg, runPat, overlay string) (time.Duration, []byte, error) {
	// No vet and no debug info: neither changes what the tests decide,
	// and together they are much of a rebuild's cost.
	args := []string{"test", "-count=1", "-short", "-failfast", "-vet=off", "-ldflags=-s -w"}
	if runPat != "" {
		args = append(args, "-run="+runPat)
	}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	cmd := command(ctx, "go", append(args, pkg)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	return time.Since(start), out, err
}

// readEquivalents reads the known equivalent mutants: each line a key as
// -list prints it (seven tab-separated fields), a tab, and the reason.
func readEquivalents(path string) (map[string]string, error) {
	out := map[string]string{}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, "\t")
		if len(parts) != 8 {
			return nil, fmt.Errorf("%s:%d: want a 7-field key and a reason, tab-separated; got %d fields", path, n, len(parts))
		}
		out[strings.Join(parts[:7], "\t")] = parts[7]
	}
	return out, sc.Err()
}

// report prints the survivors and the score per file and overall: killed
// (a test failed or timed out) over killed plus lived; equivalent and
// unviable mutants are not counted, skipped ones make the score partial.
func report(w *os.File, all []result) {
	type tally struct{ killed, lived, equiv, unviable, skipped int }
	per := map[string]*tally{}
	var files, pkgs []string
	var total tally
	for _, r := range all {
		t := per[r.File]
		if t == nil {
			t = &tally{}
			per[r.File] = t
			files = append(files, r.File)
		}
		pkg := filepath.Dir(r.File) + "/ (package)"
		pt := per[pkg]
		if pt == nil {
			pt = &tally{}
			per[pkg] = pt
			pkgs = append(pkgs, pkg)
		}
		for _, x := range []*tally{t, pt, &total} {
			switch r.Status {
			case "killed", "timeout":
				x.killed++
			case "lived":
				x.lived++
			case "equivalent":
				x.equiv++
			case "unviable":
				x.unviable++
			case "skipped":
				x.skipped++
			}
		}
	}
	sort.Strings(files)
	fmt.Fprintln(w, "\nsurvivors:")
	for _, r := range all {
		if r.Status == "lived" {
			fmt.Fprintf(w, "  %s%s\n", r.mutant, uncoveredTag(r))
		}
	}
	fmt.Fprintln(w, "\nequivalent (not scored):")
	for _, r := range all {
		if r.Status == "equivalent" {
			fmt.Fprintf(w, "  %s — %s\n", r.mutant, r.Reason)
		}
	}
	fmt.Fprintf(w, "\n%-28s %7s %7s %7s %9s %8s %7s\n", "file", "killed", "lived", "equiv", "unviable", "skipped", "score")
	line := func(name string, t *tally) {
		score := "-"
		if n := t.killed + t.lived; n > 0 {
			score = fmt.Sprintf("%.1f%%", 100*float64(t.killed)/float64(n))
		}
		if t.skipped > 0 {
			score += " (partial)"
		}
		fmt.Fprintf(w, "%-28s %7d %7d %7d %9d %8d %7s\n", name, t.killed, t.lived, t.equiv, t.unviable, t.skipped, score)
	}
	for _, f := range files {
		line(f, per[f])
	}
	if len(pkgs) > 1 {
		sort.Strings(pkgs)
		for _, p := range pkgs {
			line(p, per[p])
		}
	}
	line("total", &total)
}

func uncoveredTag(r result) string {
	if r.Status == "lived" && r.Reason == notCovered {
		return " (" + notCovered + ")"
	}
	return ""
}
