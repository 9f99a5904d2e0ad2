//go:build linux

package export_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/replay/internal/replaytest"
	"github.com/patrdb/patrdb/store/storetest"
)

// openUnder lists this process's open descriptors whose file lies under
// dir (removed files included), by descriptor: /proc/self/fd names them.
func openUnder(t *testing.T, dir string) map[int]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			out[fd] = target
		}
	}
	return out
}

// redirect makes the export's open file whose path ends in suffix write
// into dev (/dev/null: writes succeed, sync fails; /dev/full: writes fail
// with ENOSPC) from now on, as a failing disk would, and returns its
// descriptor (-1: no such file is open).
func redirect(t *testing.T, dir, suffix, dev string) int {
	t.Helper()
	for fd, target := range openUnder(t, dir) {
		if !strings.HasSuffix(target, suffix) {
			continue
		}
		d, err := os.OpenFile(dev, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := syscall.Dup3(int(d.Fd()), fd, syscall.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	return -1
}

// A step's file on a disk that fails under the export — its writes refused
// (full), or its sync (the file cannot be made durable) — fails the export
// with the disk's error, whichever table the file holds and whether the
// next step's file or the export's end closes it. Nothing is left behind:
// no folder, and no file open (the failing one included).
func TestExportOntoAFailingDiskFails(t *testing.T) {
	db := storetest.Open(t)
	replaytest.FlatRun(t, db, "s", replaytest.FlatGroup{Step: 1, Leaves: 2, Tokens: 0}, replaytest.FlatGroup{Step: 1, Leaves: 2, Tokens: 0}, replaytest.FlatGroup{Step: 2, Leaves: 2, Tokens: 0})
	for _, c := range []struct {
		file, dev string
		want      error
	}{
		{"step=1/rl.parquet", "/dev/null", syscall.EINVAL},
		{"step=2/rl.parquet", "/dev/null", syscall.EINVAL},
		{"step=1/rl.parquet", "/dev/full", syscall.ENOSPC},
		{"step=1/rl.jsonl", "/dev/full", syscall.ENOSPC},
	} {
		base := t.TempDir()
		out := filepath.Join(base, "lake")
		fd := -1
		_, err := runExport(t, db, "s", export.ExportOptions{Out: out, Format: export.RL, OnProgress: func(done, total int64) {
			if fd < 0 {
				fd = redirect(t, base, c.file, c.dev)
			}
		}})
		if fd < 0 {
			t.Fatalf("%s: not open after any group", c.file)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s onto %s: %v, want %v", c.file, c.dev, err, c.want)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 0 {
			t.Errorf("%s onto %s: the failed export left %v", c.file, c.dev, dirNames(ents))
		}
		if left := openUnder(t, base); len(left) != 0 {
			t.Errorf("%s onto %s: the failed export left files open: %v", c.file, c.dev, left)
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", strconv.Itoa(fd))); err == nil && target == c.dev {
			t.Errorf("%s onto %s: the failed export left the file open", c.file, c.dev)
		}
	}
}

// An export that fails while a step's files are open (here cancelled)
// closes them, in either format: a long-lived process that exports does
// not leak a descriptor per failed export.
func TestExportFailingMidStepClosesItsFiles(t *testing.T) {
	db := storetest.Open(t)
	replaytest.FlatRun(t, db, "c", replaytest.FlatGroup{Step: 1, Leaves: 1, Tokens: 0}, replaytest.FlatGroup{Step: 1, Leaves: 1, Tokens: 0})
	for _, format := range []export.Format{export.JSONL, export.RL} {
		base := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		open := 0
		_, err := exportCtx(ctx, db, "c", export.ExportOptions{Out: filepath.Join(base, "lake"), Format: format, OnProgress: func(done, total int64) {
			open = len(openUnder(t, base))
			cancel()
		}})
		cancel()
		if !errors.Is(err, context.Canceled) || open != 2 {
			t.Fatalf("%s export cancelled with %d files open: %v", format, open, err)
		}
		if left := openUnder(t, base); len(left) != 0 {
			t.Errorf("the cancelled %s export left files open: %v", format, left)
		}
	}
}
