package lake_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// The JSONL export carries every column the Parquet lake keeps of the
// same records, under the same names: a node line is a nodes row (plus
// run and step, which the lake's folders carry), a trajectory's turn is a
// turns row (its group is the line's), its advantage an advantages row
// (group and leaf are the line's), and the group columns a trajectory
// repeats are the groups table's.
func TestJSONLCarriesTheLakesColumns(t *testing.T) {
	ctx := context.Background()
	db := storetest.Open(t)
	if err := train(ctx, t, db, trainConfig("demo", 2, 1), false); err != nil {
		t.Fatal(err)
	}
	lakeDir, jsonDir := filepath.Join(t.TempDir(), "lake"), filepath.Join(t.TempDir(), "jsonl")
	if _, err := openLake(t, lakeDir).Export(ctx, db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.ViewRun("demo", func(r *store.RunTx) error {
		var err error
		_, err = export.Export(ctx, r, export.ExportOptions{Out: jsonDir, Format: export.JSONL})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	columns := func(table string) []string {
		paths, _ := filepath.Glob(filepath.Join(lakeDir, table, "run=demo", "step=1", "*.parquet"))
		if len(paths) == 0 {
			t.Fatalf("no %s file in the lake", table)
		}
		f, err := os.Open(paths[0])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range pf.Schema().Fields() {
			out = append(out, c.Name())
		}
		return out
	}
	// keys is the union of the members of every object lines yields.
	keys := func(name string, each func(line map[string]json.RawMessage, add func(json.RawMessage))) []string {
		f, err := os.Open(filepath.Join(jsonDir, "run=demo", "step=1", name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		set := map[string]bool{}
		add := func(raw json.RawMessage) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for k := range m {
				set[k] = true
			}
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var line map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatal(err)
			}
			each(line, add)
		}
		out := make([]string, 0, len(set))
		for k := range set {
			out = append(out, k)
		}
		return out
	}
	same := func(what string, jsonl, lakeCols []string, lakeOnly, jsonlOnly []string) {
		t.Helper()
		want := slices.Concat(slices.DeleteFunc(slices.Clone(lakeCols), func(c string) bool { return slices.Contains(lakeOnly, c) }), jsonlOnly)
		slices.Sort(want)
		slices.Sort(jsonl)
		if !slices.Equal(jsonl, want) {
			t.Errorf("%s: JSONL has %v, the lake %v", what, jsonl, want)
		}
	}
	nodeKeys := keys("nodes.jsonl", func(line map[string]json.RawMessage, add func(json.RawMessage)) {
		b, _ := json.Marshal(line)
		add(b)
	})
	same("nodes", nodeKeys, columns("nodes"), nil, []string{"run", "step"})
	var lineKeys []string
	turnKeys := keys("trajectories.jsonl", func(line map[string]json.RawMessage, add func(json.RawMessage)) {
		for k := range line {
			if !slices.Contains(lineKeys, k) {
				lineKeys = append(lineKeys, k)
			}
		}
		var turns []json.RawMessage
		if err := json.Unmarshal(line["turns"], &turns); err != nil {
			t.Fatal(err)
		}
		for _, tr := range turns {
			add(tr)
		}
	})
	same("turns", turnKeys, columns("turns"), []string{"group"}, nil)
	advKeys := keys("trajectories.jsonl", func(line map[string]json.RawMessage, add func(json.RawMessage)) {
		if string(line["advantage"]) != "null" {
			add(line["advantage"])
		}
	})
	same("advantages", advKeys, columns("advantages"), []string{"group", "leaf"}, nil)
	own := []string{"run", "step", "group", "leaf", "status", "reward", "advantage", "path_len", "turns"}
	fromGroup := slices.DeleteFunc(slices.Clone(lineKeys), func(k string) bool { return slices.Contains(own, k) })
	groups := columns("groups")
	for _, k := range fromGroup {
		if !slices.Contains(groups, k) {
			t.Errorf("a trajectory line's %q is not a column of the lake's groups", k)
		}
	}
	if !slices.Contains(fromGroup, "prompt_tokens") {
		t.Errorf("a trajectory line lacks the group's prompt_tokens: %v", lineKeys)
	}
}
