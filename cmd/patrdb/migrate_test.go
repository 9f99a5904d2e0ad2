package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// oldFile is a copy of a committed format-1 file (written before format 2).
func oldFile(t *testing.T) string {
	t.Helper()
	return copyTo(t, filepath.Join("testdata", "damaged", "base.db"), filepath.Join(t.TempDir(), "old.db"))
}

func TestMigrateCopiesAnOlderFile(t *testing.T) {
	src := oldFile(t)
	dst := filepath.Join(filepath.Dir(src), "new.db")
	before := fileHash(t, src)
	res := cli(t, "migrate", src, dst, "--json").ok(t)
	var out struct {
		From  uint64 `json:"from_format"`
		To    uint64 `json:"to_format"`
		Runs  int    `json:"runs"`
		Nodes int    `json:"nodes"`
		Turns int    `json:"turns"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, res.stdout)
	}
	if out.From != 1 || out.To != 5 || out.Runs == 0 || out.Nodes == 0 || out.Turns == 0 {
		t.Errorf("migrate --json: %+v", out)
	}
	if fileHash(t, src) != before {
		t.Error("migrate changed its source")
	}
	cli(t, "check", "--db", dst).ok(t)
	// The same runs, read from either file (only the bytes they take differ).
	runs := func(path string) string {
		var v struct {
			Runs []map[string]any `json:"runs"`
		}
		if err := json.Unmarshal([]byte(cli(t, "runs", "--db", path, "--json").ok(t).stdout), &v); err != nil {
			t.Fatal(err)
		}
		if len(v.Runs) == 0 {
			t.Fatalf("runs --json of %s lists no runs", path)
		}
		for _, r := range v.Runs {
			delete(r, "bytes")
			// The source, of an older format, has no counters and is
			// counted by reading its nodes; the copy carries them.
			if walked := r["walked"] == true; walked != (path == src) {
				t.Errorf("%s: run %v walked %v", path, r["run"], walked)
			}
			delete(r, "walked")
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if a, b := runs(src), runs(dst); a != b {
		t.Errorf("runs differ after migrate:\n%s\n%s", a, b)
	}
	// The copy takes writes.
	cli(t, "demo", "--db", dst, "--run", "fresh", "--steps", "1", "--batch", "2").ok(t)
}

func TestMigrateRefuses(t *testing.T) {
	src := oldFile(t)
	dir := filepath.Dir(src)
	cli(t, "migrate", src, src).fails(t, 2, "already exists", "never overwrites")
	cli(t, "migrate", filepath.Join(dir, "none.db"), filepath.Join(dir, "x.db")).fails(t, 1, "does not exist")
	cli(t, "migrate", src).fails(t, 2, "SRC DST")
	if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
		t.Error("a refused migrate left its DST")
	}
}

// TestWriteToOlderFileSaysMigrate: a command that writes to an older file
// fails in one line naming patrdb migrate, and the file keeps its bytes.
func TestWriteToOlderFileSaysMigrate(t *testing.T) {
	src := oldFile(t)
	before := fileHash(t, src)
	cli(t, "demo", "--db", src, "--run", "fresh", "--steps", "1", "--batch", "2").fails(t, 2, "needs migrating", "patrdb migrate "+src)
	if fileHash(t, src) != before {
		t.Error("a refused write changed the file")
	}
}
