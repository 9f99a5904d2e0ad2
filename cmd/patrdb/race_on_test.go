//go:build race

package main

// raceEnabled: this test binary is race-instrumented, so a child that is
// this binary costs about a second to start and run.
const raceEnabled = true
