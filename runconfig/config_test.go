package runconfig_test

import (
	"errors"
	"github.com/patrdb/patrdb/model"
	"reflect"
	"testing"

	"github.com/patrdb/patrdb/rubricpool"
	"github.com/patrdb/patrdb/runconfig"
	"github.com/patrdb/patrdb/tree"
)

func TestOf(t *testing.T) {
	tc := tree.DefaultConfig()
	tc.Delta, tc.M = 0.25, 3
	rc := rubricpool.DefaultConfig()
	rc.Lambda, rc.Seed = 0.3, 9
	full := runconfig.Config{Tree: tc, Rubric: &rc}
	defRubric := rubricpool.DefaultConfig()
	defRubric.Lambda = 0.5
	for _, c := range []struct {
		name    string
		conf    string
		want    runconfig.Config
		hasTree bool
		err     bool
	}{
		{"written by JSON", string(full.JSON()), full, true, false},
		{"tree.ConfigJSON", string(tree.ConfigJSON(tc)), runconfig.Config{Tree: tc}, true, false},
		{"trainer members kept out", `{"tree":{"delta":0.25,"m":3},"rubric":{"lambda":0.3,"seed":9},"lr":0.1,"mode":"patr"}`, full, true, false},
		{"missing rubric members keep the defaults", `{"rubric":{"lambda":0.5}}`, runconfig.Config{Tree: tree.DefaultConfig(), Rubric: &defRubric}, false, false},
		{"empty", ``, runconfig.Config{Tree: tree.DefaultConfig()}, false, false},
		{"no members of ours", `{"lr":0.1}`, runconfig.Config{Tree: tree.DefaultConfig()}, false, false},
		{"null members", `{"tree":null,"rubric":null}`, runconfig.Config{Tree: tree.DefaultConfig()}, false, false},
		{"not an object", `[1]`, runconfig.Config{}, false, true},
		{"tree of the wrong type", `{"tree":{"delta":"wide"}}`, runconfig.Config{}, false, true},
		{"rubric of the wrong type", `{"rubric":{"lambda":"big"}}`, runconfig.Config{}, false, true},
	} {
		got, hasTree, err := runconfig.Of(model.Run{ID: "r", Config: []byte(c.conf)})
		if c.err {
			if !errors.Is(err, model.ErrInvalid) {
				t.Errorf("%s: err %v, want ErrInvalid", c.name, err)
			}
			continue
		}
		if err != nil || hasTree != c.hasTree || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v (rubric %+v) tree %t %v\n want %+v (rubric %+v) tree %t", c.name, got, got.Rubric, hasTree, err, c.want, c.want.Rubric, c.hasTree)
		}
	}
}

func TestValidateAndDefaults(t *testing.T) {
	d := runconfig.Default()
	if d.Tree != tree.DefaultConfig() || d.Rubric == nil || *d.Rubric != rubricpool.DefaultConfig() || d.Validate() != nil {
		t.Fatalf("Default = %+v, %v", d, d.Validate())
	}
	if got := (runconfig.Config{Tree: tree.DefaultConfig()}).RubricOrDefault(); got != rubricpool.DefaultConfig() {
		t.Errorf("RubricOrDefault without a rubric = %+v", got)
	}
	bad := runconfig.Default()
	bad.Tree.M = 0
	if err := bad.Validate(); !errors.Is(err, tree.ErrInvalidConfig) {
		t.Errorf("bad tree: %v", err)
	}
	bad = runconfig.Default()
	bad.Rubric.ConsolidateAt = 0
	if err := bad.Validate(); !errors.Is(err, rubricpool.ErrInvalidConfig) {
		t.Errorf("bad rubric: %v", err)
	}
	noRubric := runconfig.Config{Tree: tree.DefaultConfig()}
	if err := noRubric.Validate(); err != nil {
		t.Errorf("no rubric buffer: %v", err)
	}
}
