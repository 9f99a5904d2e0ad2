package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/store/storetest"
)

// A file whose writer was killed in its very first open (bbolt's 16 KiB,
// no patrdb bucket yet, or zero bytes, before bbolt wrote its pages) is a
// new, empty patrdb file to every reader, as it is to the writer: runs,
// stats and check answer for no runs at exit 0, the commands about one run
// say it is not found (exit 1), none calls the file "not a patrdb file",
// and the bytes are left as they were.
func TestAFileCutShortInItsFirstOpenIsEmptyToEveryReader(t *testing.T) {
	for name, cut := range storetest.FirstOpensCutShort {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fresh.db")
			if err := cut(path); err != nil {
				t.Fatal(err)
			}
			before := fileHash(t, path)
			for _, args := range readOnlyCommands {
				r := cli(t, append([]string{"--db", path}, expandOut(t, args)...)...)
				want := 1 // about a run it does not hold
				if args[0] == "runs" || args[0] == "check" || args[0] == "stats" && len(args) == 1 {
					want = 0
				}
				if r.code != want || strings.Contains(r.stderr, "not a patrdb file") {
					t.Errorf("%v: exit %d, want %d: %s", args, r.code, want, r.stderr)
				}
			}
			if r := cli(t, "--db", path, "check"); !strings.Contains(r.stdout, "ok: 0 runs") {
				t.Errorf("check: %q", r.stdout)
			}
			if fileHash(t, path) != before {
				t.Error("reading the file changed it")
			}
		})
	}
}
