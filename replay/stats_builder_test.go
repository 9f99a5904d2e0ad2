package replay

import (
	"testing"

	"github.com/patrdb/patrdb/model"
)

// TestStatsPolicyVersions: each step reports the policy versions its
// turns were sampled with (how stale they were is TestStaleness's).
func TestStatsPolicyVersions(t *testing.T) {
	b := newStatsBuilder("r", 0)
	node := func(min, max uint64) model.Node {
		return model.Node{Status: model.NodeCompleted, Turns: 1, MinVersion: min, MaxVersion: max}
	}
	b.addGroup(model.Group{Step: 1}, []model.Node{node(1, 1), node(0, 0)}, nil)
	b.addGroup(model.Group{Step: 2}, []model.Node{node(2, 3), node(1, 2)}, nil)
	b.addGroup(model.Group{Step: 3}, []model.Node{node(0, 0)}, nil)
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
