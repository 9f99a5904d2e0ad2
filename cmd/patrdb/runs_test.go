package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
	bolt "go.etcd.io/bbolt"
)

// runsGoldens are the golden cases of runs; remote_test.go runs them
// through a server too.
var runsGoldens = []goldenCase{
	{name: "runs", args: []string{"runs"}},
	{name: "runs_json", args: []string{"runs", "--json"}},
	{name: "runs_bytes", args: []string{"runs", "--bytes"}},
}

func TestRunsGolden(t *testing.T) { checkGoldens(t, runsGoldens) }

// The counts must be what the store holds, counted here the long way.
func TestRunsCountsMatchStore(t *testing.T) {
	path := fixture(t)
	var got runsOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "runs", "--json", "--bytes").ok(t).stdout), &got); err != nil {
		t.Fatal(err)
	}
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type row struct {
		run                                                  string
		lastStep                                             uint64
		groups, open, nodes, turns, leaves, frontier, failed int
		bytes                                                int64
	}
	var want []row
	err = db.View(func(tx *store.Tx) error {
		runs, err := tx.Runs()
		if err != nil {
			return err
		}
		for _, run := range runs {
			r, _ := tx.Run(run.ID)
			w := row{run: run.ID, lastStep: run.LastStep}
			groups, err := r.Groups(0)
			if err != nil {
				return err
			}
			w.groups = len(groups)
			for _, g := range groups {
				if g.Status == model.GroupOpen {
					w.open++
				}
				nodes, err := r.GroupNodes(g)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					w.nodes++
					w.turns += n.Turns
					if n.Status.Leaf() {
						w.leaves++
					}
					switch n.Status {
					case model.NodeActive:
						w.frontier++
					case model.NodeFailed:
						w.failed++
					}
				}
			}
			sizes, err := r.BucketSizes()
			if err != nil {
				return err
			}
			for _, s := range sizes {
				w.bytes += s.Bytes
			}
			want = append(want, w)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != len(want) {
		t.Fatalf("runs --json lists %d runs, the store holds %d", len(got.Runs), len(want))
	}
	for i, w := range want {
		g := got.Runs[i]
		have := row{g.Run, g.LastStep, g.Groups, g.OpenGroups, g.Nodes, g.Turns, g.Leaves, g.Frontier, g.ByStatus[model.NodeFailed], g.Bytes}
		if have != w || g.Walked {
			t.Errorf("run %d: got %+v (walked %v), want %+v", i, have, g.Walked, w)
		}
		if g.Bytes <= 0 {
			t.Errorf("run %s has %d bytes", g.Run, g.Bytes)
		}
	}
}

func TestRunsEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	if err := storetest.OpenPath(t, path, storetest.Options()).Close(); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "--db", path, "runs").ok(t)
	if r.stdout != "no runs in "+path+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	r = cli(t, "--db", path, "runs", "--json").ok(t)
	if r.stdout != "{\n  \"runs\": []\n}\n" {
		t.Errorf("stdout %q", r.stdout)
	}
}

// --db defaults to $PATRDB_PATH, then ./patr.db.
func TestRunsDefaultDB(t *testing.T) {
	path := fixture(t)
	want := cli(t, "--db", path, "runs").ok(t).stdout
	got := cliEnv(t, testEnv{vars: map[string]string{"PATRDB_PATH": path}}, "runs").ok(t).stdout
	if got != want {
		t.Errorf("with PATRDB_PATH:\n%s\nwant:\n%s", got, want)
	}
	t.Chdir(t.TempDir())
	cli(t, "runs").fails(t, 2, "./patr.db does not exist")
}

// A file written before runs kept counters is read as it is: the figures
// are counted from the records (and the output says so), the file is left
// alone.
func TestRunsWithoutCounters(t *testing.T) {
	path := fixture(t)
	withCounters := cli(t, "--db", path, "runs", "--json").ok(t).stdout
	showBefore := cli(t, "--db", path, "show", "patr-4x4", "--json").ok(t).stdout
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("runs")).ForEachBucket(func(id []byte) error {
			run := tx.Bucket([]byte("runs")).Bucket(id)
			for _, name := range []string{"counts", "groupids"} {
				if err := run.DeleteBucket([]byte(name)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if cerr := bdb.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	before := fileHash(t, path)
	out := cli(t, "--db", path, "runs").ok(t).stdout
	if !strings.Contains(out, "runs grpo-4x4, patr-4x4 have no counters") {
		t.Errorf("runs does not say it counted by reading:\n%s", out)
	}
	var walked, counted runsOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "runs", "--json").ok(t).stdout), &walked); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(withCounters), &counted); err != nil {
		t.Fatal(err)
	}
	for i := range walked.Runs {
		if !walked.Runs[i].Walked {
			t.Errorf("run %s: walked is false", walked.Runs[i].Run)
		}
		walked.Runs[i].Walked = false
		if !reflect.DeepEqual(walked.Runs[i], counted.Runs[i]) {
			t.Errorf("walked %+v\ncounted %+v", walked.Runs[i], counted.Runs[i])
		}
	}
	var sw, sc showOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "show", "patr-4x4", "--json").ok(t).stdout), &sw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(showBefore), &sc); err != nil {
		t.Fatal(err)
	}
	sw.Walked = false
	if !reflect.DeepEqual(sw, sc) {
		t.Errorf("show walked %+v\ncounted %+v", sw, sc)
	}
	if fileHash(t, path) != before {
		t.Error("reading a file without counters changed it")
	}
}

// A damaged counter is damage like any other: runs and show refuse the run
// in one line naming it, check lists it, and the file is left as it was.
func TestRunsDamagedCounters(t *testing.T) {
	path := copyFixture(t)
	rawUpdate(t, path, func(tx *bolt.Tx) error {
		b := runBucket(tx, "patr-4x4", "counts")
		v := append([]byte(nil), b.Get(u64(0))...)
		v[len(v)-1] ^= 0xff // the payload no longer matches its CRC
		return b.Put(u64(0), v)
	})
	before := fileHash(t, path)
	for _, args := range [][]string{{"runs"}, {"show", "patr-4x4"}} {
		r := cli(t, append([]string{"--db", path}, args...)...)
		r.fails(t, 2, `run "patr-4x4"`, "damaged", "counts", "patrdb check --db "+path)
		if args[0] == "runs" && !damagedListing(r.stdout, "patr-4x4", "grpo-4x4") || args[0] != "runs" && r.stdout != "" {
			t.Errorf("%v printed %q", args, r.stdout)
		}
	}
	r := cli(t, "--db", path, "check")
	r.fails(t, 1, "check failed")
	if !strings.Contains(r.stdout, "corrupt: runs/patr-4x4/counts key 0000000000000000: CRC32C mismatch") {
		t.Errorf("check stdout %q", r.stdout)
	}
	if fileHash(t, path) != before {
		t.Error("reading damaged counters changed the file")
	}
}

// damagedListing reports whether out, what `runs` printed, is the table
// with run damaged marked so, no figure of its own, and a row of figures
// for each of the others.
func damagedListing(out, damaged string, others ...string) bool {
	rows := map[string][]string{}
	table, _, _ := strings.Cut(out, "\n\n") // a note may follow
	for i, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); i > 0 && len(f) > 0 {
			rows[f[0]] = f[1:]
		}
	}
	if d := rows[damaged]; len(d) == 0 || d[0] != "damaged" || strings.Trim(strings.Join(d[1:], ""), "-") != "" {
		return false
	}
	for _, id := range others {
		if o := rows[id]; len(o) < 6 || o[0] == "damaged" || o[1] == "-" {
			return false
		}
	}
	return len(rows) == 1+len(others)
}
