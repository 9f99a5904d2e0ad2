package main

import (
	"encoding/json"
	"testing"
)

// rubricsGoldens are the golden cases of rubrics; remote_test.go runs them
// through a server too.
var rubricsGoldens = []goldenCase{
	{name: "rubrics", args: []string{"rubrics", "patr-4x4"}},
	{name: "rubrics_json", args: []string{"rubrics", "patr-4x4", "--json"}},
	{name: "rubrics_public", args: []string{"rubrics", "patr-4x4", "--pool", "public"}},
	{name: "rubrics_lineage", args: []string{"rubrics", "patr-4x4", "--lineage", "4"}},
	{name: "rubrics_lineage_json", args: []string{"rubrics", "patr-4x4", "--lineage", "4", "--json"}},
	{name: "rubrics_none", args: []string{"rubrics", "grpo-4x4"}},
}

func TestRubricsGolden(t *testing.T) { checkGoldens(t, rubricsGoldens) }

func TestRubricsPools(t *testing.T) {
	path := fixture(t)
	counts := map[string]int{}
	for _, pool := range []string{"candidate", "public", "retired", "merged"} {
		var out rubricsOutput
		if err := json.Unmarshal([]byte(cli(t, "--db", path, "rubrics", "patr-4x4", "--pool", pool, "--json").ok(t).stdout), &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Rubrics {
			if string(r.Pool) != pool {
				t.Errorf("--pool %s listed rubric %d of pool %s", pool, r.ID, r.Pool)
			}
		}
		counts[pool] = len(out.Rubrics)
	}
	want := map[string]int{"candidate": 2, "public": 1, "retired": 1, "merged": 2}
	for p, n := range want {
		if counts[p] != n {
			t.Errorf("pool %s: %d rubrics, want %d", p, counts[p], n)
		}
	}
	var lin lineageOutput
	if err := json.Unmarshal([]byte(cli(t, "--db", path, "rubrics", "patr-4x4", "--lineage", "4", "--json").ok(t).stdout), &lin); err != nil {
		t.Fatal(err)
	}
	if lin.Rubric.ID != 4 || len(lin.Drafts) != 2 || lin.Drafts[0].MergedInto != 4 || lin.Drafts[1].MergedInto != 4 {
		t.Errorf("lineage of 4 = %+v", lin)
	}
	if lin.Rubric.RunningCorr == nil || *lin.Rubric.RunningCorr <= 0 {
		t.Errorf("rubric 4 has no running correlation: %v", lin.Rubric.RunningCorr)
	}
}

func TestRubricsErrors(t *testing.T) {
	path := fixture(t)
	cli(t, "--db", path, "rubrics", "patr-4x4", "--pool", "gold").fails(t, 2, `--pool "gold"`)
	cli(t, "--db", path, "rubrics", "patr-4x4", "--lineage", "x").fails(t, 2, `--lineage "x"`)
	cli(t, "--db", path, "rubrics", "patr-4x4", "--lineage", "4", "--pool", "public").fails(t, 2, "lineage", "pool")
	cli(t, "--db", path, "rubrics", "patr-4x4", "--lineage", "42").fails(t, 1, "rubric 42 not found")
	cli(t, "--db", path, "rubrics", "nope").fails(t, 1, `run "nope" not found`)
}
