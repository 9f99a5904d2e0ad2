package tree_test

import (
	"testing"

	"github.com/patrdb/patrdb/store/storetest"
	"github.com/patrdb/patrdb/tree"
)

// A lease asks for a process score at the end of its interval unless the
// run does no scoring or the branch will have reached MaxTurns; with no
// turn limit (MaxTurns 0) every interval is scored.
func TestLeaseAsksForScore(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func(*tree.Config)
		want bool
	}{
		{"no turn limit", func(c *tree.Config) { c.MaxTurns = 0 }, true},
		{"limit beyond the interval", func(c *tree.Config) { c.MaxTurns = c.K + 1 }, true},
		{"limit at the interval's end", func(c *tree.Config) { c.MaxTurns = c.K }, false},
		{"no scoring", func(c *tree.Config) { c.NoScoring, c.B0, c.TopExpand = true, 4, 0 }, false},
	} {
		cfg := tree.DefaultConfig()
		c.cfg(&cfg)
		db := storetest.Open(t)
		co := coordinator(t, db, "r", cfg, nil)
		openStep(t, co, 1, tasks(1))
		ls := lease(t, co, tree.LeaseRequest{Worker: "w", Max: 1, Step: 1})
		if len(ls) != 1 || ls[0].Score != c.want {
			t.Errorf("%s: leases %+v, want one with Score %v", c.name, ls, c.want)
		}
	}
}
