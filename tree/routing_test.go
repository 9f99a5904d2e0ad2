package tree

import (
	"errors"
	"github.com/patrdb/patrdb/model"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/patrdb/patrdb/rollout"
	"pgregory.net/rapid"
)

// want is the expected part of one Decision; Score and Delta are checked
// separately against the input and the config.
type want struct {
	node     uint64
	action   model.Action
	rule     string
	children int
	rank     int
}

func cfgWith(f func(*Config)) Config {
	c := DefaultConfig()
	if f != nil {
		f(&c)
	}
	return c
}

// Scores in these tables are dyadic fractions (multiples of 1/64) so that
// s < ref − Delta is computed exactly and the boundary cases are real.
func TestRoute(t *testing.T) {
	tests := []struct {
		name     string
		cfg      Config
		branches []Branch
		ref      float64
		want     []want
		active   int
	}{
		{
			// ref = 0.875, threshold 0.375: only 0.25 falls below.
			name:     "max rule defaults",
			cfg:      DefaultConfig(),
			branches: []Branch{{1, 0.875, 0}, {2, 0.25, 0}, {3, 0.5, 0}, {4, 0.4375, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionPrune, RuleMax, 0, 3},
				{3, model.ActionExpand, RuleTop, 2, 1},
				{4, model.ActionSurvive, RuleSurvive, 0, 2},
			},
			active: 5,
		},
		{
			// Same scores, Delta 0.125: threshold 0.75 prunes all but the best.
			name:     "max rule tight delta",
			cfg:      cfgWith(func(c *Config) { c.Delta = 0.125 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.25, 0}, {3, 0.5, 0}, {4, 0.4375, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionPrune, RuleMax, 0, 3},
				{3, model.ActionPrune, RuleMax, 0, 1},
				{4, model.ActionPrune, RuleMax, 0, 2},
			},
			active: 2,
		},
		{
			// Even count: median = (0.4375+0.5)/2 = 0.46875, threshold 0.34375.
			name:     "median rule even count",
			cfg:      cfgWith(func(c *Config) { c.PruneRule = PruneMedian; c.Delta = 0.125 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.25, 0}, {3, 0.5, 0}, {4, 0.4375, 0}},
			ref:      0.46875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionPrune, RuleMedian, 0, 3},
				{3, model.ActionExpand, RuleTop, 2, 1},
				{4, model.ActionSurvive, RuleSurvive, 0, 2},
			},
			active: 5,
		},
		{
			// Odd count: median 0.5, threshold 0.25; input order is not rank order.
			name:     "median rule odd count",
			cfg:      cfgWith(func(c *Config) { c.PruneRule = PruneMedian; c.Delta = 0.25 }),
			branches: []Branch{{10, 0.125, 0}, {20, 0.875, 0}, {30, 0.5, 0}},
			ref:      0.5,
			want: []want{
				{10, model.ActionPrune, RuleMedian, 0, 2},
				{20, model.ActionExpand, RuleTop, 2, 0},
				{30, model.ActionExpand, RuleTop, 2, 1},
			},
			active: 4,
		},
		{
			// s == ref − Delta is not "<": the boundary branch is kept.
			name:     "boundary is kept",
			cfg:      cfgWith(func(c *Config) { c.TopExpand = 1 }),
			branches: []Branch{{1, 1, 0}, {2, 0.5, 0}, {3, 0.484375, 0}},
			ref:      1,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionSurvive, RuleSurvive, 0, 1},
				{3, model.ActionPrune, RuleMax, 0, 2},
			},
			active: 3,
		},
		{
			// All equal: nothing pruned, ranks and expansion go by node id.
			name:     "ties by node id and input order preserved",
			cfg:      DefaultConfig(),
			branches: []Branch{{7, 0.5, 0}, {3, 0.5, 0}, {5, 0.5, 0}, {1, 0.5, 0}},
			ref:      0.5,
			want: []want{
				{7, model.ActionSurvive, RuleSurvive, 0, 3},
				{3, model.ActionExpand, RuleTop, 2, 1},
				{5, model.ActionSurvive, RuleSurvive, 0, 2},
				{1, model.ActionExpand, RuleTop, 2, 0},
			},
			active: 6,
		},
		{
			name:     "all equal under median",
			cfg:      cfgWith(func(c *Config) { c.PruneRule = PruneMedian; c.Delta = 0 }),
			branches: []Branch{{2, 0.25, 0}, {1, 0.25, 0}},
			ref:      0.25,
			want: []want{
				{2, model.ActionExpand, RuleTop, 2, 1},
				{1, model.ActionExpand, RuleTop, 2, 0},
			},
			active: 4,
		},
		{
			name:     "single branch max",
			cfg:      DefaultConfig(),
			branches: []Branch{{42, 0.0625, 0}},
			ref:      0.0625,
			want:     []want{{42, model.ActionExpand, RuleTop, 2, 0}},
			active:   2,
		},
		{
			name:     "single branch median",
			cfg:      cfgWith(func(c *Config) { c.PruneRule = PruneMedian; c.M = 3 }),
			branches: []Branch{{42, 0.0625, 0}},
			ref:      0.0625,
			want:     []want{{42, model.ActionExpand, RuleTop, 3, 0}},
			active:   3,
		},
		{
			// The best branch repeats 6 times: pruned by "repeat" even though
			// it sets the reference; the next two expand.
			name:     "repeat prune",
			cfg:      DefaultConfig(),
			branches: []Branch{{1, 0.875, 6}, {2, 0.75, 5}, {3, 0.625, 0}, {4, 0, 9}},
			ref:      0.875,
			want: []want{
				{1, model.ActionPrune, RuleRepeat, 0, 0},
				{2, model.ActionExpand, RuleTop, 2, 1},
				{3, model.ActionExpand, RuleTop, 2, 2},
				{4, model.ActionPrune, RuleRepeat, 0, 3}, // repeat is checked before the score rule
			},
			active: 4,
		},
		{
			name:     "repeat prune disabled",
			cfg:      cfgWith(func(c *Config) { c.RepeatPrune = 0 }),
			branches: []Branch{{1, 0.875, 100}, {2, 0.75, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionExpand, RuleTop, 2, 1},
			},
			active: 4,
		},
		{
			name:     "TopExpand zero",
			cfg:      cfgWith(func(c *Config) { c.TopExpand = 0 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.25, 0}, {3, 0.5, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionSurvive, RuleSurvive, 0, 0},
				{2, model.ActionPrune, RuleMax, 0, 2},
				{3, model.ActionSurvive, RuleSurvive, 0, 1},
			},
			active: 2,
		},
		{
			name:     "TopExpand above survivors",
			cfg:      cfgWith(func(c *Config) { c.TopExpand = 5 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.25, 0}, {3, 0.5, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionPrune, RuleMax, 0, 2},
				{3, model.ActionExpand, RuleTop, 2, 1},
			},
			active: 4,
		},
		{
			name:     "delta above 1 prunes nothing",
			cfg:      cfgWith(func(c *Config) { c.Delta = 1.5; c.TopExpand = 1 }),
			branches: []Branch{{1, 0, 0}, {2, 1, 0}, {3, 0.25, 0}},
			ref:      1,
			want: []want{
				{1, model.ActionSurvive, RuleSurvive, 0, 2},
				{2, model.ActionExpand, RuleTop, 2, 0},
				{3, model.ActionSurvive, RuleSurvive, 0, 1},
			},
			active: 4,
		},
		{
			// 4 kept, cap 7 leaves room for 3 more: rank 0 takes 3 children
			// (+2), rank 1 gets the 2 that still fit (+1).
			name:     "width cap shrinks children",
			cfg:      cfgWith(func(c *Config) { c.M = 3; c.MaxActive = 7 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.75, 0}, {3, 0.625, 0}, {4, 0.5, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 3, 0},
				{2, model.ActionExpand, RuleTop, 2, 1},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
				{4, model.ActionSurvive, RuleSurvive, 0, 3},
			},
			active: 7,
		},
		{
			// Cap 5 leaves room for 1: rank 0 expands, rank 1 could only get
			// one child and survives instead.
			name:     "width cap turns expansion into survive",
			cfg:      cfgWith(func(c *Config) { c.MaxActive = 5 }),
			branches: []Branch{{4, 0.5, 0}, {3, 0.625, 0}, {2, 0.75, 0}, {1, 0.875, 0}},
			ref:      0.875,
			want: []want{
				{4, model.ActionSurvive, RuleSurvive, 0, 3},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
				{2, model.ActionSurvive, RuleWidthCap, 0, 1},
				{1, model.ActionExpand, RuleTop, 2, 0},
			},
			active: 5,
		},
		{
			// A pruned branch frees its slot: 4 kept under cap 5.
			name:     "width cap counts only kept branches",
			cfg:      cfgWith(func(c *Config) { c.MaxActive = 5 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.75, 0}, {3, 0.625, 0}, {4, 0.5, 0}, {5, 0.25, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 2, 0},
				{2, model.ActionSurvive, RuleWidthCap, 0, 1},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
				{4, model.ActionSurvive, RuleSurvive, 0, 3},
				{5, model.ActionPrune, RuleMax, 0, 4},
			},
			active: 5,
		},
		{
			name:     "width cap already full",
			cfg:      cfgWith(func(c *Config) { c.MaxActive = 4 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.75, 0}, {3, 0.625, 0}, {4, 0.5, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionSurvive, RuleWidthCap, 0, 0},
				{2, model.ActionSurvive, RuleWidthCap, 0, 1},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
				{4, model.ActionSurvive, RuleSurvive, 0, 3},
			},
			active: 4,
		},
		{
			// 5 kept under cap 4 (e.g. a resumed run with a tighter cap):
			// nothing expands, and nothing is pruned to make room.
			name:     "survivors alone exceed cap",
			cfg:      cfgWith(func(c *Config) { c.MaxActive = 4 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.75, 0}, {3, 0.625, 0}, {4, 0.5, 0}, {5, 0.5, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionSurvive, RuleWidthCap, 0, 0},
				{2, model.ActionSurvive, RuleWidthCap, 0, 1},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
				{4, model.ActionSurvive, RuleSurvive, 0, 3},
				{5, model.ActionSurvive, RuleSurvive, 0, 4},
			},
			active: 5,
		},
		{
			// With M = 1 an expansion costs no width, so a full cap does not
			// block it: nothing had to shrink.
			name:     "M=1 under full cap",
			cfg:      cfgWith(func(c *Config) { c.M = 1; c.MaxActive = 4; c.TopExpand = 1 }),
			branches: []Branch{{1, 0.875, 0}, {2, 0.75, 0}, {3, 0.625, 0}, {4, 0.5, 0}},
			ref:      0.875,
			want: []want{
				{1, model.ActionExpand, RuleTop, 1, 0},
				{2, model.ActionSurvive, RuleSurvive, 0, 1},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
				{4, model.ActionSurvive, RuleSurvive, 0, 3},
			},
			active: 4,
		},
		{
			// GRPO mode: no routing at all, not even repeat pruning.
			name:     "NoScoring survives everything",
			cfg:      cfgWith(func(c *Config) { c.NoScoring = true }),
			branches: []Branch{{1, 0, 0}, {2, 0, 9}, {3, 0, 0}},
			ref:      0,
			want: []want{
				{1, model.ActionSurvive, RuleSurvive, 0, 0},
				{2, model.ActionSurvive, RuleSurvive, 0, 1},
				{3, model.ActionSurvive, RuleSurvive, 0, 2},
			},
			active: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatalf("test config invalid: %v", err)
			}
			in := slices.Clone(tc.branches)
			got := Route(tc.branches, tc.cfg)
			if !slices.Equal(in, tc.branches) {
				t.Fatalf("Route modified its input: %v -> %v", in, tc.branches)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d decisions, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				d := got[i]
				g := want{d.Node, d.Action, d.Rule, d.Children, d.Rank}
				if g != w {
					t.Errorf("decision %d = %+v, want %+v", i, g, w)
				}
				if d.Reference != tc.ref || d.Delta != tc.cfg.Delta || d.Score != tc.branches[i].Score {
					t.Errorf("decision %d: score/ref/delta = %v/%v/%v, want %v/%v/%v",
						i, d.Score, d.Reference, d.Delta, tc.branches[i].Score, tc.ref, tc.cfg.Delta)
				}
			}
			if a := ActiveAfter(got); a != tc.active {
				t.Errorf("ActiveAfter = %d, want %d", a, tc.active)
			}
		})
	}
}

// TestRoutePruneBoundaryDecimal: the documented rule keeps a branch with s
// = Reference − Delta even when the decimals involved round the wrong way in
// binary (0.8 − 0.2 = 0.6000000000000001), and prunes one a hair below it.
func TestRoutePruneBoundaryDecimal(t *testing.T) {
	tests := []struct {
		rule       PruneRule
		scores     []float64 // the first is the branch on the boundary
		delta, ref float64
	}{
		{PruneMax, []float64{0.6, 0.8}, 0.2, 0.8},
		{PruneMax, []float64{0.7, 0.9}, 0.2, 0.9},
		{PruneMax, []float64{0.1, 0.4}, 0.3, 0.4},
		{PruneMax, []float64{0.45, 0.9}, 0.45, 0.9},
		{PruneMax, []float64{0.3, 1}, 0.7, 1},
		{PruneMax, []float64{0.8, 0.8}, 0, 0.8},
		// Median of 0.1, 0.3, 0.9 is 0.3.
		{PruneMedian, []float64{0.1, 0.3, 0.9}, 0.2, 0.3},
		// Median of 0.2, 0.6, 0.8, 1 is 0.7.
		{PruneMedian, []float64{0.6, 0.2, 0.8, 1}, 0.1, 0.7},
	}
	for _, tc := range tests {
		cfg := cfgWith(func(c *Config) { c.PruneRule, c.Delta, c.TopExpand = tc.rule, tc.delta, 0 })
		for _, below := range []float64{0, 1e-6} {
			branches := make([]Branch, len(tc.scores))
			for i, s := range tc.scores {
				branches[i] = Branch{Node: uint64(i + 1), Score: s}
			}
			branches[0].Score -= below
			d := Route(branches, cfg)[0]
			wantPrune := below > 0
			if (below == 0 && d.Reference != tc.ref) || (d.Action == model.ActionPrune) != wantPrune {
				t.Errorf("%s %v delta %v, first branch %v: %s by %q against %v; want pruned %t against %v",
					tc.rule, tc.scores, tc.delta, branches[0].Score, d.Action, d.Rule, d.Reference, wantPrune, tc.ref)
			}
		}
	}
}

func TestRouteEmpty(t *testing.T) {
	if got := Route(nil, DefaultConfig()); got != nil {
		t.Errorf("Route(nil) = %v, want nil", got)
	}
	if got := Route([]Branch{}, DefaultConfig()); got != nil {
		t.Errorf("Route(empty) = %v, want nil", got)
	}
}

// A NaN score must not poison the reference or the ordering: it counts as 0.
// TestRouteInvalidCounts: Route assumes a validated config, but a
// negative TopExpand acts as 0 and an M below 1 expands nothing, rather
// than expanding every branch or into no children.
func TestRouteInvalidCounts(t *testing.T) {
	branches := []Branch{{1, 0.75, 0}, {2, 0.5, 0}, {3, 0.625, 0}}
	for _, cfg := range []Config{
		cfgWith(func(c *Config) { c.TopExpand = -1 }),
		cfgWith(func(c *Config) { c.M = 0; c.TopExpand = 2 }),
		cfgWith(func(c *Config) { c.M = -3; c.TopExpand = 2 }),
	} {
		for _, d := range Route(branches, cfg) {
			if d.Action == model.ActionExpand || d.Children != 0 {
				t.Errorf("TopExpand %d, M %d: %+v", cfg.TopExpand, cfg.M, d)
			}
		}
	}
}

func TestRouteNaNScore(t *testing.T) {
	got := Route([]Branch{{1, math.NaN(), 0}, {2, 0.875, 0}}, DefaultConfig())
	if got[0].Score != 0 || got[0].Action != model.ActionPrune || got[0].Rule != RuleMax || got[0].Rank != 1 {
		t.Errorf("NaN branch = %+v, want score 0, pruned by max, rank 1", got[0])
	}
	if got[1].Reference != 0.875 || got[1].Action != model.ActionExpand {
		t.Errorf("best branch = %+v, want reference 0.875, expanded", got[1])
	}
}

// Duplicate node ids (a caller bug) still route deterministically, by input
// position.
func TestRouteDuplicateIDs(t *testing.T) {
	cfg := cfgWith(func(c *Config) { c.TopExpand = 1 })
	got := Route([]Branch{{5, 0.5, 0}, {5, 0.5, 0}}, cfg)
	if got[0].Rank != 0 || got[0].Action != model.ActionExpand || got[1].Rank != 1 || got[1].Action != model.ActionSurvive {
		t.Errorf("got %+v", got)
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	ok := []struct {
		name string
		mut  func(*Config)
	}{
		{"MaxActive equal to B0", func(c *Config) { c.MaxActive = c.B0 }},
		{"Delta zero", func(c *Config) { c.Delta = 0 }},
		{"Delta above 1", func(c *Config) { c.Delta = 2 }},
		{"median", func(c *Config) { c.PruneRule = PruneMedian }},
		{"no caps", func(c *Config) { c.MaxTurns, c.RepeatPrune, c.TopExpand = 0, 0, 0 }},
		{"M one", func(c *Config) { c.M = 1 }},
		{"GRPO", func(c *Config) { c.NoScoring, c.B0 = true, 8 }},
	}
	for _, tc := range ok {
		if err := cfgWith(tc.mut).Validate(); err != nil {
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		}
	}
	bad := []struct {
		field string
		mut   func(*Config)
	}{
		{"B0", func(c *Config) { c.B0 = 0 }},
		{"K", func(c *Config) { c.K = 0 }},
		{"M", func(c *Config) { c.M = 0 }},
		{"M", func(c *Config) { c.M = -1 }},
		{"TopExpand", func(c *Config) { c.TopExpand = -1 }},
		{"Delta", func(c *Config) { c.Delta = -0.1 }},
		{"Delta", func(c *Config) { c.Delta = math.NaN() }},
		{"Delta", func(c *Config) { c.Delta = math.Inf(1) }},
		{"PruneRule", func(c *Config) { c.PruneRule = "mean" }},
		{"PruneRule", func(c *Config) { c.PruneRule = "" }},
		{"RepeatPrune", func(c *Config) { c.RepeatPrune = -1 }},
		{"MaxTurns", func(c *Config) { c.MaxTurns = -1 }},
		{"MaxActive", func(c *Config) { c.MaxActive = c.B0 - 1 }},
		{"MaxActive", func(c *Config) { c.MaxActive = -5 }},
	}
	for _, tc := range bad {
		err := cfgWith(tc.mut).Validate()
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %q does not name the field", tc.field, err)
		}
	}
	// Every problem is reported, not just the first.
	err := Config{}.Validate()
	for _, f := range []string{"B0", "K", "M", "PruneRule"} {
		if !strings.Contains(err.Error(), f+" ") {
			t.Errorf("zero Config: error %q does not name %s", err, f)
		}
	}
}

func TestRouteProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := DefaultConfig()
		cfg.B0, cfg.K, cfg.MaxTurns = 1, 1, 0
		cfg.M = rapid.IntRange(1, 4).Draw(t, "M")
		cfg.TopExpand = rapid.IntRange(0, 5).Draw(t, "TopExpand")
		cfg.Delta = rapid.SampledFrom([]float64{0, 0.125, 0.25, 0.5, 1, 1.5}).Draw(t, "Delta")
		cfg.PruneRule = rapid.SampledFrom([]PruneRule{PruneMax, PruneMedian}).Draw(t, "PruneRule")
		cfg.RepeatPrune = rapid.IntRange(0, 6).Draw(t, "RepeatPrune")
		if rapid.Bool().Draw(t, "capped") {
			cfg.MaxActive = rapid.IntRange(1, 40).Draw(t, "MaxActive")
		}
		// Distinct ids so that routing must not depend on input order;
		// scores from a small set so that ties are common.
		ids := rapid.SliceOfNDistinct(rapid.Uint64Range(1, 64), 0, 16, func(u uint64) uint64 { return u }).Draw(t, "ids")
		branches := make([]Branch, len(ids))
		for i, id := range ids {
			branches[i] = Branch{
				Node:      id,
				Score:     rapid.SampledFrom([]float64{0, 0.25, 0.5, 0.625, 0.75, 1}).Draw(t, "score"),
				RepeatRun: rapid.IntRange(0, 8).Draw(t, "repeat"),
			}
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("generated config invalid: %v", err)
		}

		got := Route(branches, cfg)
		if len(got) != len(branches) {
			t.Fatalf("%d decisions for %d branches", len(got), len(branches))
		}
		if again := Route(branches, cfg); !reflect.DeepEqual(got, again) {
			t.Fatalf("Route not deterministic:\n%v\n%v", got, again)
		}
		byNode := map[uint64]rollout.Decision{}
		for _, d := range got {
			byNode[d.Node] = d
		}
		perm := rapid.Permutation(branches).Draw(t, "perm")
		for _, d := range Route(perm, cfg) {
			if d != byNode[d.Node] {
				t.Fatalf("node %d: %+v after permuting input, %+v before", d.Node, d, byNode[d.Node])
			}
		}

		best := math.Inf(-1)
		for _, b := range branches {
			best = max(best, b.Score)
		}
		kept, expands := 0, 0
		ranks := make([]bool, len(got))
		for i, d := range got {
			if d.Node != branches[i].Node {
				t.Fatalf("decision %d is for node %d, input has %d", i, d.Node, branches[i].Node)
			}
			ranks[d.Rank] = true
			if d.Delta != cfg.Delta || d.Reference != got[0].Reference {
				t.Fatalf("decision %d: delta %v reference %v not uniform", i, d.Delta, d.Reference)
			}
			switch d.Action {
			case model.ActionPrune:
				if d.Children != 0 {
					t.Fatalf("pruned with children: %+v", d)
				}
				if cfg.PruneRule == PruneMax && d.Score == best && d.Rule != RuleRepeat {
					t.Fatalf("best branch pruned by score: %+v", d)
				}
			case model.ActionExpand:
				kept++
				expands++
				if d.Rule != RuleTop || d.Children < 1 || d.Children > cfg.M || (d.Children < 2 && cfg.M >= 2) {
					t.Fatalf("bad expansion %+v (M=%d)", d, cfg.M)
				}
			case model.ActionSurvive:
				kept++
				if d.Children != 0 || (d.Rule != RuleSurvive && d.Rule != RuleWidthCap) {
					t.Fatalf("bad survivor %+v", d)
				}
			}
		}
		for r, seen := range ranks {
			if !seen {
				t.Fatalf("rank %d missing", r)
			}
		}
		if expands > cfg.TopExpand {
			t.Fatalf("%d expansions, TopExpand %d", expands, cfg.TopExpand)
		}
		if cfg.MaxActive > 0 && cfg.MaxActive >= kept && ActiveAfter(got) > cfg.MaxActive {
			t.Fatalf("active after %d exceeds MaxActive %d", ActiveAfter(got), cfg.MaxActive)
		}
	})
}

// TestDecisionRecord: what the store keeps of a routing decision is every
// routed value but the node (the record's key) and the rank, so stats and
// what-if read stored and re-routed decisions alike.
func TestDecisionRecord(t *testing.T) {
	d := rollout.Decision{Node: 9, Action: model.ActionExpand, Score: 0.75, Reference: 0.8, Delta: 0.5, Rule: RuleTop, Children: 3, Rank: 1}
	want := model.Decision{Interval: 4, Action: model.ActionExpand, Score: 0.75, Reference: 0.8, Delta: 0.5, Rule: RuleTop, Children: 3}
	if got := d.Record(4); !reflect.DeepEqual(got, want) {
		t.Errorf("Record = %+v, want %+v", got, want)
	}
}
