package main

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store"
)

func TestCheckGolden(t *testing.T) {
	checkGoldens(t, []goldenCase{
		{name: "check", args: []string{"check"}},
		{name: "check_json", args: []string{"check", "--json"}},
	})
}

// copyFixture builds the fixture and returns a copy of it that a test may
// damage (the fixture itself is checked when the test ends).
func copyFixture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// rawUpdate edits a file with bbolt directly, bypassing every check of the
// store: how a damaged or hand-edited file comes about.
func rawUpdate(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func runBucket(tx *bolt.Tx, run, name string) *bolt.Bucket {
	return tx.Bucket([]byte("runs")).Bucket([]byte(run)).Bucket([]byte(name))
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func TestCheckReportsDamagedValue(t *testing.T) {
	path := copyFixture(t)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		b := runBucket(tx, "patr-4x4", "nodes")
		v := append([]byte(nil), b.Get(u64(4))...)
		v[len(v)-1] ^= 0xff // the payload no longer matches its CRC
		return b.Put(u64(4), v)
	})
	before := fileHash(t, path)
	r := cli(t, "--db", path, "check")
	// The damaged node is reported first; its turns, child-index entry and
	// advantage then point at a node check could not read.
	r.fails(t, 1, "check failed: 7 violations", path)
	if !strings.HasPrefix(r.stdout, "corrupt: runs/patr-4x4/nodes key 0000000000000004: CRC32C mismatch\n") || strings.Count(r.stdout, "\n") != 7 {
		t.Errorf("stdout %q", r.stdout)
	}
	r = cli(t, "--db", path, "check", "--json")
	if r.code != 1 {
		t.Fatalf("exit %d", r.code)
	}
	var out checkOutput
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.OK || len(out.Violations) != 7 || out.Violations[0].Kind != "corrupt" || out.Violations[0].Key != "0000000000000004" ||
		out.Violations[0].Bucket != "runs/patr-4x4/nodes" || out.Runs != 2 {
		t.Errorf("check --json = %+v", out)
	}
	if fileHash(t, path) != before {
		t.Error("check changed the file")
	}
	// The other commands meet the damage as an error line, not a crash.
	// They name the run, the bucket and the next step, and print nothing
	// of the damaged run (runs lists the other run, and this one as
	// damaged).
	for _, args := range [][]string{{"tree", "patr-4x4", "1"}, {"traj", "patr-4x4", "4"}} {
		r := cli(t, append([]string{"--db", path}, args...)...)
		r.fails(t, 2, `run "patr-4x4" in `+path+" is damaged (nodes: key 0000000000000004: CRC32C mismatch", "patrdb check --db "+path)
		if r.stdout != "" {
			t.Errorf("%v printed %q", args, r.stdout)
		}
	}
	// runs and show read the run's counters, not its nodes, and --bytes
	// the run's pages (walked with bounds), not its records: what they
	// print is whole, and the damage is check's to find.
	for _, args := range [][]string{{"show", "patr-4x4"}, {"runs"}, {"show", "patr-4x4", "--bytes"}, {"runs", "--bytes"}} {
		if r := cli(t, append([]string{"--db", path}, args...)...); r.code != 0 || !strings.Contains(r.stdout, "patr-4x4") {
			t.Errorf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	// A run without damage is still shown.
	if r := cli(t, "--db", path, "show", "grpo-4x4"); r.code != 0 {
		t.Errorf("show grpo-4x4: exit %d: %s", r.code, r.stderr)
	}
}

func TestCheckReportsBrokenInvariant(t *testing.T) {
	path := copyFixture(t)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return runBucket(tx, "patr-4x4", "frontier").Delete(u64(11))
	})
	r := cli(t, "--db", path, "check")
	r.fails(t, 1, "check failed: 1 violation")
	if r.stdout != "invariant: runs/patr-4x4/nodes key 000000000000000b: active node missing from the frontier\n" {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestCheckDamagedMetaPages(t *testing.T) {
	path := copyFixture(t)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Both meta pages: flip a byte of the txid, which the meta checksum covers.
	for _, page := range []int64{0, int64(store.DefaultOptions().PageSize)} {
		b := make([]byte, 1)
		off := page + 16 + 48
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0xff
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	before := fileHash(t, path)
	cli(t, "--db", path, "check").fails(t, 1, "check failed", "corrupt")
	cli(t, "--db", path, "check", "--json").fails(t, 1, "check failed", "corrupt")
	cli(t, "--db", path, "runs").fails(t, 2, path+" is damaged ((meta pages): checksum error)", "patrdb check --db "+path)
	if fileHash(t, path) != before {
		t.Error("check changed the file")
	}
}

func TestCheckNotPatrdb(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, "--db", text, "check").fails(t, 2, "not a patrdb file", text)

	other := filepath.Join(dir, "other.bolt")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before := fileHash(t, other)
	cli(t, "--db", other, "check").fails(t, 2, "not a patrdb file")
	if fileHash(t, other) != before {
		t.Error("check changed a foreign bbolt file")
	}
}

func TestCheckNewerFormat(t *testing.T) {
	path := copyFixture(t)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("format"), u64(99))
	})
	before := fileHash(t, path)
	cli(t, "--db", path, "check").fails(t, 2, "format 99")
	cli(t, "--db", path, "show", "patr-4x4").fails(t, 2, "format 99")
	if fileHash(t, path) != before {
		t.Error("a newer file was modified")
	}
}

func TestCheckProgressLabel(t *testing.T) {
	for _, c := range []struct {
		p    store.CheckProgress
		want string
	}{
		{store.CheckProgress{Phase: "pages"}, "check: pages"},
		{store.CheckProgress{Run: "r1", Phase: "nodes", Done: 250, Total: 1000}, "check run r1: nodes"},
	} {
		if got := progressLabel(c.p); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
	// Not a terminal: no progress at all, so pipes and golden files see
	// only the result.
	app := &App{stderr: &strings.Builder{}, isTerminal: func(io.Writer) bool { return false }}
	if report, _ := app.checkProgress(); report != nil {
		t.Error("progress reported to a non-terminal")
	}
	// A terminal: a bar per part, cleared at the end.
	var term strings.Builder
	app = &App{stderr: &term, isTerminal: func(io.Writer) bool { return true }}
	report, done := app.checkProgress()
	if report == nil {
		t.Fatal("no progress on a terminal")
	}
	report(store.CheckProgress{Run: "r1", Phase: "nodes", Total: 10})
	report(store.CheckProgress{Run: "r1", Phase: "nodes", Done: 5, Total: 10})
	report(store.CheckProgress{Run: "r1", Phase: "log"})
	done()
	if !strings.Contains(term.String(), "check run r1: nodes") || !strings.Contains(term.String(), "check run r1: log") {
		t.Errorf("terminal got %q", term.String())
	}
}
