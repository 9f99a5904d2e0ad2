package replay_test

import (
	"testing"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/tree"
)

// Overrides are empty only when no key is set: any one of them makes a
// what-if (a replay with the recorded config otherwise).
func TestOverridesEmpty(t *testing.T) {
	d, n, rule := 0.2, 3, tree.PruneMedian
	if !(replay.Overrides{}).Empty() {
		t.Error("no override is not Empty")
	}
	for name, o := range map[string]replay.Overrides{
		"delta": {Delta: &d}, "m": {M: &n}, "top": {Top: &n}, "rule": {Rule: &rule}, "max_active": {MaxActive: &n},
	} {
		if o.Empty() {
			t.Errorf("%s alone is Empty", name)
		}
	}
}

// ParseWhatIf reads keys in any case and ignores the spaces around keys
// and values, as a user types them on a command line.
func TestParseWhatIfKeysIgnoreCaseAndSpaces(t *testing.T) {
	o, err := replay.ParseWhatIf("DELTA = 0.3, Rule= median ")
	if err != nil {
		t.Fatal(err)
	}
	if o.Delta == nil || *o.Delta != 0.3 || o.Rule == nil || *o.Rule != tree.PruneMedian {
		t.Errorf("DELTA = 0.3, Rule= median: %+v", o)
	}
}
