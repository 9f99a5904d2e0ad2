package tree_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/tree"
)

// A recorded tree config names only what differs from the defaults (a run
// created with {"tree":{"k":3}}): the fields it leaves out read as their
// defaults, not as zero. No tree member is no config; one that does not
// parse is ErrInvalid.
func TestRecordedConfig(t *testing.T) {
	want := tree.DefaultConfig()
	want.K, want.B0 = 3, 6
	got, ok, err := tree.RecordedConfig(model.Run{ID: "r", Config: []byte(`{"tree":{"k":3,"b0":6},"lr":1e-5}`)})
	if err != nil || !ok || got != want {
		t.Errorf("a partial config: %+v, %v, %v; want %+v", got, ok, err, want)
	}
	for _, conf := range []string{"", "  ", `{"lr":1}`, `{"tree":null}`} {
		if _, ok, err := tree.RecordedConfig(model.Run{ID: "r", Config: []byte(conf)}); ok || err != nil {
			t.Errorf("config %q: ok %v, %v; want no tree config", conf, ok, err)
		}
	}
	for _, conf := range []string{`[1]`, `{"tree":{"k":"three"}}`, `{"tree":5}`} {
		if _, ok, err := tree.RecordedConfig(model.Run{ID: "r", Config: []byte(conf)}); ok || !errors.Is(err, model.ErrInvalid) {
			t.Errorf("config %q: ok %v, %v; want ErrInvalid", conf, ok, err)
		}
	}
}
