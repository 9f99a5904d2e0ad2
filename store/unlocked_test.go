package store

import (
	"testing"

	"github.com/patrdb/patrdb/model"
)

// A group is unlocked exactly when its outcomes had zero variance and its
// shaped totals do not; the other three cases are not.
func TestAdvantageUnlocked(t *testing.T) {
	for _, c := range []struct {
		before, after, want bool
	}{{true, false, true}, {true, true, false}, {false, false, false}, {false, true, false}} {
		a := model.Advantage{ZeroVariance: c.before, ZeroVarianceAfter: c.after}
		if got := a.Unlocked(); got != c.want {
			t.Errorf("zero variance before %v after %v: Unlocked %v, want %v", c.before, c.after, got, c.want)
		}
	}
}
