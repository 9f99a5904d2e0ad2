package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A file whose writer was killed in its very first open (bbolt's 16 KiB,
// no patrdb bucket yet, or zero bytes, before bbolt wrote its pages) is a
// new, empty patrdb file to every reader, as it is to the writer: runs,
// stats and check answer for no runs at exit 0, the commands about one run
// say it is not found (exit 1), none calls the file "not a patrdb file",
// and the bytes are left as they were.
func TestAFileCutShortInItsFirstOpenIsEmptyToEveryReader(t *testing.T) {
	for name, cut := range map[string]func(path string) error{
		"bbolt's pages": func(path string) error {
			bdb, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				return err
			}
			return bdb.Close()
		},
		"zero bytes": func(path string) error { return os.WriteFile(path, nil, 0o600) },
	} {
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
