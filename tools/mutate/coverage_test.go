package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Two tests' profiles of one file: TestA runs the block of lines 3–5 and
// the one of 7–8; TestB only the one of 7–8; nobody runs 10–11. Lines
// 6 and 9 (a case clause's expression, say) are in no block.
const (
	profileA = `mode: set
example.com/m/pkg/f.go:3.2,5.10 2 1
example.com/m/pkg/f.go:7.3,8.4 1 1
example.com/m/pkg/f.go:10.2,11.5 1 0
example.com/m/pkg/g.go:1.1,2.2 1 1
`
	profileB = `mode: set
example.com/m/pkg/f.go:3.2,5.10 2 0
example.com/m/pkg/f.go:7.3,8.4 1 1
example.com/m/pkg/f.go:10.2,11.5 1 0
example.com/m/pkg/g.go:1.1,2.2 1 0
`
)

func testCoverage(t *testing.T) *coverage {
	t.Helper()
	cv := &coverage{tests: []string{"TestA", "TestB"}, dur: []time.Duration{time.Second, 3 * time.Second},
		blocks: map[string][]coveredBlock{}, index: map[blockPos]int{}}
	for i, p := range []string{profileA, profileB} {
		if err := cv.add(strings.NewReader(p), i); err != nil {
			t.Fatal(err)
		}
	}
	return cv
}

func TestCoverageMapsPositionsToTests(t *testing.T) {
	cv := testCoverage(t)
	for _, c := range []struct {
		line, col      int
		fnStart, fnEnd int
		file           string
		want           []string
		dur            time.Duration
	}{
		{4, 1, 1, 12, "pkg/f.go", []string{"TestA"}, time.Second},
		{3, 2, 1, 12, "pkg/f.go", []string{"TestA"}, time.Second},              // a block's first byte
		{5, 10, 1, 12, "pkg/f.go", []string{"TestA"}, time.Second},             // and its last
		{7, 5, 1, 12, "pkg/f.go", []string{"TestA", "TestB"}, 4 * time.Second}, // both, in list order
		{10, 3, 1, 12, "pkg/f.go", nil, 0},                                     // a block no test ran
		{6, 1, 6, 9, "pkg/f.go", []string{"TestA", "TestB"}, 4 * time.Second},  // in no block: its function's tests
		{9, 1, 9, 12, "pkg/f.go", nil, 0},                                      // in no block, function never run
		{1, 5, 1, 2, "pkg/g.go", []string{"TestA"}, time.Second},               // files are told apart
		{1, 5, 1, 2, "pkg/h.go", nil, 0},                                       // a file with no profile
		{3, 1, 3, 3, "pkg/f.go", []string{"TestA"}, time.Second},               // before the block's column: no block, function 3–3
	} {
		m := mutant{File: c.file, Line: c.line, Col: c.col, fnStart: c.fnStart, fnEnd: c.fnEnd}
		got, d := cv.testsFor(m)
		if !slices.Equal(got, c.want) || d != c.dur {
			t.Errorf("%s:%d:%d (function %d–%d): tests %v over %s, want %v over %s",
				c.file, c.line, c.col, c.fnStart, c.fnEnd, got, d, c.want, c.dur)
		}
	}
}

func TestCoverageRejectsABadProfile(t *testing.T) {
	cv := testCoverage(t)
	if err := cv.add(strings.NewReader("mode: set\nf.go:garbage\n"), 0); err == nil {
		t.Fatal("a malformed profile line was accepted")
	}
}

func TestRunPatternMatchesExactlyTheTests(t *testing.T) {
	re := regexp.MustCompile(runPattern([]string{"TestA", "FuzzB"}))
	for name, want := range map[string]bool{"TestA": true, "FuzzB": true, "TestAB": false, "XTestA": false, "TestB": false} {
		if re.MatchString(name) != want {
			t.Errorf("%s matched %v, want %v", name, !want, want)
		}
	}
}
