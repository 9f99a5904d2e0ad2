//go:build !unix

package main

func cpuTime() (float64, bool) { return 0, false }
