package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/tools/cover"
)

// coverage says which of a package's top-level tests execute each part of
// its code, so a mutant runs only the tests that can notice it: most of a
// package's suite never reaches a given line, and running it anyway is
// most of a mutant's cost.
type coverage struct {
	tests  []string
	dur    []time.Duration // each test's own run, with coverage on
	build  time.Duration   // compiling the test binary: about what each mutant's rebuild costs
	blocks map[string][]coveredBlock
	index  map[blockPos]int // where a block is in blocks[file]
}

type blockPos struct {
	file                                 string
	startLine, startCol, endLine, endCol int
}

// A coveredBlock is one basic block of the coverage profile (a run of
// statements executed together) and the tests that executed it.
type coveredBlock struct {
	startLine, startCol, endLine, endCol int
	tests                                []int // indexes into coverage.tests
}

func (b coveredBlock) contains(line, col int) bool {
	after := line > b.startLine || line == b.startLine && col >= b.startCol
	before := line < b.endLine || line == b.endLine && col <= b.endCol
	return after && before
}

// measureCoverage builds pkg's test binary with coverage of pkg alone, runs
// each test that matches runPat (all when empty) on its own, and records
// which blocks each one executed. Tests run as the mutants' do (-short),
// workers at a time; the profiles stay in dir.
func measureCoverage(ctx context.Context, dir, pkg, runPat string, workers int) (*coverage, error) {
	importPath, err := goList(ctx, pkg)
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "pkg.test")
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "test", "-c", "-vet=off", "-ldflags=-s -w",
		"-covermode=set", "-coverpkg="+importPath, "-o", bin, pkg)
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the tests of %s with coverage: %v\n%s", pkg, err, out)
	}
	cv := &coverage{build: time.Since(start), blocks: map[string][]coveredBlock{}, index: map[blockPos]int{}}
	if runPat == "" {
		runPat = "."
	}
	list := exec.CommandContext(ctx, bin, "-test.list", runPat)
	list.Dir = pkg
	out, err := list.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the tests of %s: %v", pkg, err)
	}
	for _, name := range strings.Fields(string(out)) {
		// Benchmarks are not run by -run; the rest (tests, fuzz seed
		// corpora, examples with output) are.
		if !strings.HasPrefix(name, "Benchmark") {
			cv.tests = append(cv.tests, name)
		}
	}
	cv.dur = make([]time.Duration, len(cv.tests))
	profiles := make([]string, len(cv.tests))
	errs := make([]error, len(cv.tests))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for i := range next {
				profiles[i] = filepath.Join(dir, strconv.Itoa(i)+".cover")
				cmd := command(ctx, bin, "-test.run", "^"+regexp.QuoteMeta(cv.tests[i])+"$",
					"-test.short", "-test.count=1", "-test.timeout=10m", "-test.coverprofile="+profiles[i])
				cmd.Dir = pkg
				start := time.Now()
				out, err := cmd.CombinedOutput()
				cv.dur[i] = time.Since(start)
				if err != nil {
					errs[i] = fmt.Errorf("%s fails on its own without a mutant (%v); fix it first:\n%s", cv.tests[i], err, out)
				}
			}
		})
	}
	for i := range cv.tests {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, p := range profiles {
		if errs[i] != nil {
			return nil, errs[i]
		}
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		err = cv.add(f, i)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return cv, nil
}

// add merges one test's coverage profile: every block it executed gains
// the test. Files are keyed by base name, as coverage is of one package.
func (cv *coverage) add(r io.Reader, test int) error {
	ps, err := cover.ParseProfilesFromReader(r)
	if err != nil {
		return err
	}
	for _, p := range ps {
		name := path.Base(p.FileName)
		for _, b := range p.Blocks {
			// Unexecuted blocks are kept too: a position in one is not
			// reached, which differs from a position in no block.
			k := blockPos{name, b.StartLine, b.StartCol, b.EndLine, b.EndCol}
			i, ok := cv.index[k]
			if !ok {
				i = len(cv.blocks[name])
				cv.index[k] = i
				cv.blocks[name] = append(cv.blocks[name], coveredBlock{startLine: b.StartLine, startCol: b.StartCol,
					endLine: b.EndLine, endCol: b.EndCol})
			}
			if b.Count > 0 {
				cv.blocks[name][i].tests = append(cv.blocks[name][i].tests, test)
			}
		}
	}
	return nil
}

// testsFor lists the tests that execute the mutant's position, in the
// order go test -list gave them, and their summed run time. A position in
// no block (a case clause's expression sits between the switch's block and
// the clause's) takes the tests that execute any block of its function.
// None means no test reaches the mutant.
func (cv *coverage) testsFor(m mutant) ([]string, time.Duration) {
	name := filepath.Base(m.File)
	hit := map[int]bool{}
	found := false
	for _, b := range cv.blocks[name] {
		if b.contains(m.Line, m.Col) {
			found = true
			for _, t := range b.tests {
				hit[t] = true
			}
		}
	}
	if !found {
		for _, b := range cv.blocks[name] {
			if b.endLine >= m.fnStart && b.startLine <= m.fnEnd {
				for _, t := range b.tests {
					hit[t] = true
				}
			}
		}
	}
	var names []string
	var d time.Duration
	for i, t := range cv.tests {
		if hit[i] {
			names = append(names, t)
			d += cv.dur[i]
		}
	}
	return names, d
}

// runPattern is a go test -run pattern matching exactly these top-level
// tests.
func runPattern(tests []string) string {
	q := make([]string, len(tests))
	for i, t := range tests {
		q[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

func goList(ctx context.Context, pkg string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v", pkg, err)
	}
	return strings.TrimSpace(string(out)), nil
}
