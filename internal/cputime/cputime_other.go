//go:build !unix

package cputime

// Process is not known here: ok is false.
func Process() (seconds float64, ok bool) { return 0, false }
