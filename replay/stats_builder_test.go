package replay

import (
	"testing"

	"github.com/patrdb/patrdb/store"
)

// TestStatsPolicyVersions: each step reports the policy versions its
// turns were sampled with (how stale they were is TestStaleness's).
func TestStatsPolicyVersions(t *testing.T) {
	b := newStatsBuilder("r", 0)
	node := func(min, max uint64) store.Node {
		return store.Node{Status: store.NodeCompleted, Turns: 1, MinVersion: min, MaxVersion: max}
	}
	b.addGroup(store.Group{Step: 1}, []store.Node{node(1, 1), node(0, 0)}, nil)
	b.addGroup(store.Group{Step: 2}, []store.Node{node(2, 3), node(1, 2)}, nil)
	b.addGroup(store.Group{Step: 3}, []store.Node{node(0, 0)}, nil)
	rs := b.finish()
	want := [][2]uint64{{1, 1}, {1, 3}, {0, 0}}
	for i, s := range rs.Steps {
		if got := [2]uint64{s.MinPolicyVersion, s.MaxPolicyVersion}; got != want[i] {
			t.Errorf("step %d: versions %d–%d, want %v", s.Step, got[0], got[1], want[i])
		}
	}
	if s := rs.Total; s.MinPolicyVersion != 1 || s.MaxPolicyVersion != 3 {
		t.Errorf("total: %d–%d", s.MinPolicyVersion, s.MaxPolicyVersion)
	}
}
