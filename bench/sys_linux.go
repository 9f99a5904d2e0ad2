//go:build linux

package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// canDropCache says whether cold figures can be measured: dropCache evicts
// one file from the page cache without touching anyone else's.
const canDropCache = true

// dropCache writes back and evicts path's pages from the page cache
// (posix_fadvise DONTNEED), so the next read goes to the device.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	const fadvDontNeed = 4
	if _, _, e := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, fadvDontNeed, 0, 0); e != 0 {
		return e
	}
	return nil
}

// statusKB reads a "Name:  123 kB" field of /proc/self/status.
func statusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			v, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return v
		}
	}
	return 0
}

// maxRSSBytes converts a child's rusage to bytes (Linux reports KiB).
func maxRSSBytes(ru *syscall.Rusage) int64 { return ru.Maxrss * 1024 }

// memTotal is the machine's memory from /proc/meminfo.
func memTotal() string {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return strconv.FormatFloat(float64(kb)/(1<<20), 'f', 1, 64) + " GiB"
		}
	}
	return "unknown"
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
		}
	}
	return "unknown"
}

// kernel is the running kernel's release.
func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return "Linux " + strings.TrimSpace(string(b))
}

// allocatedBytes is the space a file occupies (st_blocks), which for a
// bbolt file is less than its size: the file grows by truncation and the
// tail past the last written page stays a hole.
func allocatedBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// settle flushes the file system holding dir: fsync of the directory
// commits pending unlinks, and sync(2) writes back everything else, so the
// next timed fsync does not pay for them.
func settle(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
	syscall.Sync()
}

// datasync makes a file's written data durable (fdatasync: the data and
// the size, not the times).
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// processCPU is the CPU time the process has used, user and system, all
// threads (the garbage collector's included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// inblockKB is what a finished child read from block devices, in KB.
func inblockKB(ps *os.ProcessState) float64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return float64(ru.Inblock) * 512 / 1024
}
