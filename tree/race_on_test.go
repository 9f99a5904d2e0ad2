//go:build race

package tree_test

// raceEnabled: this test binary is race-instrumented, several times slower
// than a real server, so timings mean nothing and big fixtures cost minutes.
const raceEnabled = true
