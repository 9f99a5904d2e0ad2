package replay

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/tree"
)

// Overrides are the routing parameters a what-if analysis may change. A
// nil field keeps the base config's value.
type Overrides struct {
	Delta     *float64        // "delta": prune margin
	M         *int            // "m": children per expansion
	Top       *int            // "top": branches expanded per interval (TopExpand)
	Rule      *tree.PruneRule // "rule": max or median
	MaxActive *int            // "max_active": width cap, 0 = none
}

// WhatIfKeys are the keys ParseWhatIf accepts, in canonical order.
var WhatIfKeys = []string{"delta", "m", "top", "rule", "max_active"}

// ParseWhatIf parses "delta=0.3,m=3,top=1,rule=median,max_active=8": comma
// separated key=value pairs, each key at most once. An unknown key is
// ErrWhatIfKey; a malformed pair or value is ErrWhatIfValue. The empty
// string is no override. Range checks happen in Apply, against the whole
// config (max_active is bounded by the base's B0).
func ParseWhatIf(s string) (Overrides, error) {
	var o Overrides
	seen := map[string]bool{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || k == "" {
			return Overrides{}, fmt.Errorf("%w: %q is not key=value", ErrWhatIfValue, pair)
		}
		if seen[k] {
			return Overrides{}, fmt.Errorf("%w: %s given twice", ErrWhatIfValue, k)
		}
		seen[k] = true
		atoi := func() (*int, error) {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%w: %s=%q is not an integer", ErrWhatIfValue, k, v)
			}
			return &n, nil
		}
		var err error
		switch k {
		case "delta":
			d, perr := strconv.ParseFloat(v, 64)
			if perr != nil || math.IsNaN(d) || math.IsInf(d, 0) {
				return Overrides{}, fmt.Errorf("%w: delta=%q is not a finite number", ErrWhatIfValue, v)
			}
			o.Delta = &d
		case "m":
			o.M, err = atoi()
		case "top":
			o.Top, err = atoi()
		case "max_active":
			o.MaxActive, err = atoi()
		case "rule":
			r := tree.PruneRule(strings.ToLower(v))
			if r != tree.PruneMax && r != tree.PruneMedian {
				return Overrides{}, fmt.Errorf("%w: rule=%q, want %s or %s", ErrWhatIfValue, v, tree.PruneMax, tree.PruneMedian)
			}
			o.Rule = &r
		default:
			return Overrides{}, fmt.Errorf("%w: %q (known: %s)", ErrWhatIfKey, k, strings.Join(WhatIfKeys, ", "))
		}
		if err != nil {
			return Overrides{}, err
		}
	}
	return o, nil
}

// Apply returns base with the overrides set, or ErrWhatIfValue (wrapping
// tree.ErrInvalidConfig) when the result fails tree.Config.Validate.
func (o Overrides) Apply(base tree.Config) (tree.Config, error) {
	c := base
	if o.Delta != nil {
		c.Delta = *o.Delta
	}
	if o.M != nil {
		c.M = *o.M
	}
	if o.Top != nil {
		c.TopExpand = *o.Top
	}
	if o.Rule != nil {
		c.PruneRule = *o.Rule
	}
	if o.MaxActive != nil {
		c.MaxActive = *o.MaxActive
	}
	if err := c.Validate(); err != nil {
		return tree.Config{}, fmt.Errorf("%w: %w", ErrWhatIfValue, err)
	}
	return c, nil
}

// Empty reports whether no key is overridden.
func (o Overrides) Empty() bool {
	return o.Delta == nil && o.M == nil && o.Top == nil && o.Rule == nil && o.MaxActive == nil
}

// String renders the overrides in ParseWhatIf's syntax, keys in canonical
// order.
func (o Overrides) String() string {
	var parts []string
	if o.Delta != nil {
		parts = append(parts, "delta="+strconv.FormatFloat(*o.Delta, 'g', -1, 64))
	}
	if o.M != nil {
		parts = append(parts, "m="+strconv.Itoa(*o.M))
	}
	if o.Top != nil {
		parts = append(parts, "top="+strconv.Itoa(*o.Top))
	}
	if o.Rule != nil {
		parts = append(parts, "rule="+string(*o.Rule))
	}
	if o.MaxActive != nil {
		parts = append(parts, "max_active="+strconv.Itoa(*o.MaxActive))
	}
	return strings.Join(parts, ",")
}

// recordedConfig is the tree config a run recorded (tree.RecordedConfig),
// or tree.DefaultConfig and false when it recorded none or one that does
// not parse: the run's config is opaque to the store, so replay analyses
// against the defaults, and the report says so, rather than refuse.
func recordedConfig(info model.Run) (tree.Config, bool) {
	cfg, ok, err := tree.RecordedConfig(info)
	if err != nil || !ok {
		return tree.DefaultConfig(), false
	}
	return cfg, true
}
