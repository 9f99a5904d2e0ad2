package store

import "testing"

// A sub-bucket is found by subIndex, not by a map: a name listed in
// subBuckets that subIndex does not place would leave its bucket nil to
// every reader and writer, and the run would read as damaged.
func TestSubIndexPlacesEverySubBucket(t *testing.T) {
	for i, name := range subBuckets {
		if got := subIndex(name); got != i {
			t.Errorf("subIndex(%q) = %d, want %d", name, got, i)
		}
	}
	for _, name := range []string{bCounts, bGroupIDs, "", "node"} {
		if got := subIndex(name); got != -1 {
			t.Errorf("subIndex(%q) = %d, want -1", name, got)
		}
	}
}

// The counters count nodes by statusIndex: a status it did not place would
// vanish from every figure of runs and show.
func TestStatusIndexPlacesEveryStatus(t *testing.T) {
	for i, s := range statusOrder {
		if got := statusIndex(s); got != i {
			t.Errorf("statusIndex(%q) = %d, want %d", s, got, i)
		}
	}
	if got := statusIndex("done"); got != -1 {
		t.Errorf("statusIndex(%q) = %d, want -1", "done", got)
	}
}
