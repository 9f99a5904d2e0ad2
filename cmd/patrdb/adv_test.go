package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// advGoldens are the golden cases of adv; remote_test.go runs them
// through a server too.
var advGoldens = []goldenCase{
	{name: "adv", args: []string{"adv", "patr-4x4"}},
	{name: "adv_json", args: []string{"adv", "patr-4x4", "--json"}},
	{name: "adv_open_step", args: []string{"adv", "patr-4x4", "--step", "2"}},
}

func TestAdvGolden(t *testing.T) { checkGoldens(t, advGoldens) }

// The default step is the last with advantages; the per-group figures are
// those the leaves' records carry.
func TestAdvDefaultStepAndFigures(t *testing.T) {
	path := fixture(t)
	last := cli(t, "--db", path, "adv", "patr-4x4", "--json").ok(t).stdout
	if step1 := cli(t, "--db", path, "adv", "patr-4x4", "--step", "1", "--json").ok(t).stdout; step1 != last {
		t.Error("adv without --step is not step 1, the last with advantages")
	}
	var out advOutput
	if err := json.Unmarshal([]byte(last), &out); err != nil {
		t.Fatal(err)
	}
	if out.Step != 1 || len(out.Groups) != 2 {
		t.Fatalf("adv = %+v", out)
	}
	for _, g := range out.Groups {
		var sum float64
		for _, l := range g.Leaves {
			sum += l.Total
			if want := l.Outcome + *g.Lambda*l.RubricScore; math.Abs(l.Total-want) > 1e-12 {
				t.Errorf("leaf %d: total %v, want %v", l.Leaf, l.Total, want)
			}
		}
		if mean := sum / float64(len(g.Leaves)); math.Abs(mean-*g.Mean) > 1e-12 {
			t.Errorf("group %d: mean %v, leaves average %v", g.Group, *g.Mean, mean)
		}
	}
	if !*out.Groups[1].ZeroVariance || *out.Groups[1].ZeroVarianceAfter {
		t.Errorf("group 2 should be zero-variance before shaping only: %+v", out.Groups[1])
	}
}

func TestAdvErrors(t *testing.T) {
	path := fixture(t)
	cli(t, "--db", path, "adv", "patr-4x4", "--step", "9").fails(t, 1, "step 9", "no groups")
	cli(t, "--db", path, "adv", "patr-4x4", "--step", "0").fails(t, 2, `--step "0"`)
	cli(t, "--db", path, "adv", "patr-4x4", "--step", "x").fails(t, 2, `--step "x"`)
	cli(t, "--db", path, "adv", "nope").fails(t, 1, `run "nope" not found`)

	fresh := filepath.Join(t.TempDir(), "fresh.db")
	db := storetest.OpenPath(t, fresh, storetest.Options())
	if err := db.Update(func(tx *store.Tx) error { _, err := tx.CreateRun("new", nil, nil); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cli(t, "--db", fresh, "adv", "new").fails(t, 1, `run "new" has no advantage records yet`)
}
