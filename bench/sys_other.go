//go:build !linux

package main

import (
	"errors"
	"os"
	"runtime"
	"syscall"
	"time"
)

const canDropCache = false

func dropCache(string) error { return errors.New("bench: dropping the page cache needs Linux") }

func statusKB(string) int64 { return 0 }

// maxRSSBytes: Darwin and the BSDs differ in units; report what rusage says
// only where it is known to be bytes.
func maxRSSBytes(ru *syscall.Rusage) int64 {
	if runtime.GOOS == "darwin" {
		return ru.Maxrss
	}
	return ru.Maxrss * 1024
}

func memTotal() string { return "unknown" }
func cpuModel() string { return "unknown" }
func kernel() string   { return runtime.GOOS }

func allocatedBytes(fi os.FileInfo) int64 { return fi.Size() }

func settle(string) {}

// datasync makes a file's written data durable.
func datasync(f *os.File) error { return f.Sync() }

// processCPU is not measured off Linux.
func processCPU() time.Duration { return 0 }

func inblockKB(*os.ProcessState) float64 { return 0 }
