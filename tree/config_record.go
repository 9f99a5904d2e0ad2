package tree

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"reflect"
	"strings"
)

// A run records its tree config in model.Run.Config, a JSON object whose
// "tree" member is a Config; other members belong to whoever created the
// run (the rubric buffer's config, a trainer's own settings) and are kept
// as they are.

// ConfigJSON is a run config (model.Run.Config) that records c and nothing
// else: {"tree": c}. Package runconfig writes both the tree and the rubric
// members.
func ConfigJSON(c Config) json.RawMessage {
	b, err := json.Marshal(struct {
		Tree Config `json:"tree"`
	}{c})
	if err != nil { // plain numbers and strings: cannot fail
		panic(err)
	}
	return b
}

// RecordedConfig returns the tree config a run recorded; ok is false when
// the run has none. A config member that does not parse is ErrInvalid.
func RecordedConfig(run model.Run) (cfg Config, ok bool, err error) {
	if len(bytes.TrimSpace(run.Config)) == 0 {
		return Config{}, false, nil
	}
	var probe struct {
		Tree json.RawMessage `json:"tree"`
	}
	if err := json.Unmarshal(run.Config, &probe); err != nil {
		return Config{}, false, fmt.Errorf("%w: run %q config is not a JSON object: %v", model.ErrInvalid, run.ID, err)
	}
	if len(probe.Tree) == 0 || string(probe.Tree) == "null" {
		return Config{}, false, nil
	}
	cfg = DefaultConfig()
	if err := json.Unmarshal(probe.Tree, &cfg); err != nil {
		return Config{}, false, fmt.Errorf("%w: run %q tree config: %v", model.ErrInvalid, run.ID, err)
	}
	return cfg, true, nil
}

// withTree returns the run's config JSON with its "tree" member set to cfg
// and every other member kept.
func withTree(run model.Run, cfg Config) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(run.Config)) > 0 {
		if err := json.Unmarshal(run.Config, &obj); err != nil {
			return nil, fmt.Errorf("%w: run %q config is not a JSON object: %v", model.ErrInvalid, run.ID, err)
		}
	}
	tree, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	obj["tree"] = tree
	return json.Marshal(obj)
}

// ConfigDiff names every field whose value differs between a and b, as
// "k: 5 → 2", in field order.
func ConfigDiff(a, b Config) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	for i := range t.NumField() {
		x, y := va.Field(i).Interface(), vb.Field(i).Interface()
		if x != y {
			name := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
			out = append(out, fmt.Sprintf("%s: %v → %v", name, x, y))
		}
	}
	return out
}
