//go:build unix

// Package cputime reads the CPU time a process has used, for benchmarks
// on a shared machine.
package cputime

import "syscall"

// Process is the CPU time (user + system) the process has used so far, in
// seconds: on a machine shared with other work it moves less than wall
// time, which waits for a core too.
func Process() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime), true
}
