package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// runsGoldens are the golden cases of runs; remote_test.go runs them
// through a server too.
var runsGoldens = []goldenCase{
	{name: "runs", args: []string{"runs"}},
	{name: "runs_json", args: []string{"runs", "--json"}},
}

func TestRunsGolden(t *testing.T) { checkGoldens(t, runsGoldens) }

// The counts must be what the store holds, counted here the long way.
func TestRunsCountsMatchStore(t *testing.T) {
	path := fixture(t)
	var got runsOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "runs", "--json").ok(t).stdout), &got); err != nil {
		t.Fatal(err)
	}
	o := store.DefaultOptions()
	o.ReadOnly = true
	db, err := store.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var want []runRow
	err = db.View(func(tx *store.Tx) error {
		runs, err := tx.Runs()
		if err != nil {
			return err
		}
		for _, run := range runs {
			r, _ := tx.Run(run.ID)
			row := runRow{Run: run.ID, Status: string(run.Status), Steps: run.LastStep}
			groups, err := r.Groups(0)
			if err != nil {
				return err
			}
			row.Groups = len(groups)
			for _, g := range groups {
				nodes, err := r.GroupNodes(g)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					row.Nodes++
					row.Turns += n.Turns
					if n.Status.Leaf() {
						row.Leaves++
					}
				}
			}
			sizes, err := r.BucketSizes()
			if err != nil {
				return err
			}
			for _, s := range sizes {
				row.Bytes += s.Bytes
			}
			want = append(want, row)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != len(want) {
		t.Fatalf("runs --json lists %d runs, the store holds %d", len(got.Runs), len(want))
	}
	for i := range want {
		if got.Runs[i] != want[i] {
			t.Errorf("run %d: got %+v, want %+v", i, got.Runs[i], want[i])
		}
		if got.Runs[i].Bytes <= 0 {
			t.Errorf("run %s has %d bytes", got.Runs[i].Run, got.Runs[i].Bytes)
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
