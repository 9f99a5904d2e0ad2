//go:build linux

package replay_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/patrdb/patrdb/replay"
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
// into dev (/dev/null: writes succeed, sync fails; /dev/full: writes fail)
// from now on, as a failing disk would, and reports whether it found it.
func redirect(t *testing.T, dir, suffix, dev string) bool {
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
		return true
	}
	return false
}

// A step's Parquet file that cannot be made durable (its sync fails) fails
// the export, whether the next step's file or the export's end closes it,
// and leaves nothing behind: never a finished export missing a file.
func TestExportFailsWhenAParquetFileCannotBeSynced(t *testing.T) {
	db := storetest.Open(t)
	flatRun(t, db, "s", flatGroup{1, 2, 0}, flatGroup{1, 2, 0}, flatGroup{2, 2, 0})
	for _, failStep := range []string{"step=1", "step=2"} {
		base := t.TempDir()
		out := filepath.Join(base, "lake")
		found := false
		_, err := export(t, db, "s", replay.ExportOptions{Out: out, Format: replay.RL, OnProgress: func(done, total int64) {
			if !found {
				found = redirect(t, base, failStep+"/rl.parquet", "/dev/null")
			}
		}})
		if !found {
			t.Fatalf("%s: no open rl.parquet of that step after a group", failStep)
		}
		if err == nil {
			t.Errorf("%s's rl.parquet could not be synced, and the export succeeded", failStep)
		}
		if ents, _ := os.ReadDir(base); len(ents) != 0 {
			t.Errorf("%s: the failed export left %v", failStep, dirNames(ents))
		}
		if left := openUnder(t, base); len(left) != 0 {
			t.Errorf("%s: the failed export left files open: %v", failStep, left)
		}
	}
}
