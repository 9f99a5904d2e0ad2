package batch

import (
	"net/url"
	"strconv"
	"strings"
)

// Query is opts as URL query parameters (what GET .../steps/{step}/batch
// takes): layout, credit, norm, groups (comma-separated ids), exclude_pruned,
// exclude_truncated, include_failed (true/false), min_policy_version,
// max_policy_version. Zero values are left out.
func (o Options) Query() url.Values {
	q := url.Values{}
	for name, v := range map[string]string{"layout": string(o.Layout), "credit": string(o.Credit), "norm": string(o.Norm)} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if o.Groups != nil {
		q.Set("groups", joinIDs(o.Groups))
	}
	for name, on := range map[string]bool{"exclude_pruned": o.ExcludePruned, "exclude_truncated": o.ExcludeTruncated, "include_failed": o.IncludeFailed} {
		if on {
			q.Set(name, "true")
		}
	}
	for name, v := range map[string]uint64{"min_policy_version": o.MinPolicyVersion, "max_policy_version": o.MaxPolicyVersion} {
		if v != 0 {
			q.Set(name, strconv.FormatUint(v, 10))
		}
	}
	return q
}

// ParseQuery reads Options from Query's parameters; an unknown parameter
// or a value that does not parse is ErrInvalidOptions, and so is what
// Validate refuses.
func ParseQuery(q url.Values) (Options, error) {
	var o Options
	for name, vs := range q {
		v := vs[len(vs)-1]
		var err error
		switch name {
		case "layout":
			o.Layout = Layout(v)
		case "credit":
			o.Credit = Credit(v)
		case "norm":
			o.Norm = Norm(v)
		case "groups":
			o.Groups, err = splitIDs(strings.TrimSpace(v)) // empty: every group
		case "exclude_pruned":
			o.ExcludePruned, err = strconv.ParseBool(v)
		case "exclude_truncated":
			o.ExcludeTruncated, err = strconv.ParseBool(v)
		case "include_failed":
			o.IncludeFailed, err = strconv.ParseBool(v)
		case "min_policy_version":
			o.MinPolicyVersion, err = strconv.ParseUint(v, 10, 64)
		case "max_policy_version":
			o.MaxPolicyVersion, err = strconv.ParseUint(v, 10, 64)
		default:
			return o, invalid("unknown parameter %q (want layout, credit, norm, groups, exclude_pruned, exclude_truncated, include_failed, min_policy_version, max_policy_version)", name)
		}
		if err != nil {
			return o, invalid("%s=%q does not parse", name, v)
		}
	}
	return o, o.Validate()
}
