package tree

import (
	"github.com/patrdb/patrdb/model"
	"testing"
)

// The width cap at its edges: a cap of 1 is a cap (not "no cap", which is
// 0), and a group already over its cap (a what-if replay with a tighter
// cap than the run had) expands nothing, even into a single child.
func TestRouteWidthCapEdges(t *testing.T) {
	type got struct {
		action   model.Action
		rule     string
		children int
	}
	for _, c := range []struct {
		name     string
		cfg      Config
		branches []Branch
		want     []got // by node id order of branches
	}{
		{
			name:     "cap 1 with one branch leaves no room to expand",
			cfg:      cfgWith(func(c *Config) { c.B0, c.MaxActive = 1, 1 }),
			branches: []Branch{{Node: 1, Score: 0.5}},
			want:     []got{{model.ActionSurvive, RuleWidthCap, 0}},
		},
		{
			name:     "cap 2 with one branch leaves room for 2 children",
			cfg:      cfgWith(func(c *Config) { c.B0, c.MaxActive, c.M = 1, 2, 2 }),
			branches: []Branch{{Node: 1, Score: 0.5}},
			want:     []got{{model.ActionExpand, RuleTop, 2}},
		},
		{
			name:     "over the cap: M = 1 expands nothing",
			cfg:      cfgWith(func(c *Config) { c.B0, c.MaxActive, c.M, c.TopExpand = 1, 1, 1, 1 }),
			branches: []Branch{{Node: 1, Score: 0.5}, {Node: 2, Score: 0.5}, {Node: 3, Score: 0.5}},
			want:     []got{{model.ActionSurvive, RuleWidthCap, 0}, {model.ActionSurvive, RuleSurvive, 0}, {model.ActionSurvive, RuleSurvive, 0}},
		},
		{
			name:     "at the cap: M = 1 replaces the branch by one child",
			cfg:      cfgWith(func(c *Config) { c.B0, c.MaxActive, c.M, c.TopExpand = 1, 1, 1, 1 }),
			branches: []Branch{{Node: 1, Score: 0.5}},
			want:     []got{{model.ActionExpand, RuleTop, 1}},
		},
	} {
		ds := Route(c.branches, c.cfg)
		if len(ds) != len(c.want) {
			t.Fatalf("%s: %d decisions, want %d", c.name, len(ds), len(c.want))
		}
		for i, d := range ds {
			if g := (got{d.Action, d.Rule, d.Children}); g != c.want[i] || d.Node != c.branches[i].Node {
				t.Errorf("%s: node %d: %+v, want node %d %+v", c.name, d.Node, g, c.branches[i].Node, c.want[i])
			}
		}
	}
}
