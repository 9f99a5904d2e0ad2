package store

import "testing"

// The id sets Check keeps (ids seen, duplicates) hold ids past the bitset
// their sequence sized too: a damaged file's ids need not stay below its
// sequence, and one missed there would hide a duplicate or a dangling id.
func TestIDSetHoldsIDsPastItsSequence(t *testing.T) {
	s := newIDSet(10)
	for _, id := range []uint64{0, 10, 63, 64, 1000, 1 << 40} {
		if s.has(id) {
			t.Fatalf("empty set has %d", id)
		}
		s.add(id)
		if !s.has(id) {
			t.Errorf("added %d, has(%d) = false", id, id)
		}
	}
	for _, id := range []uint64{1, 65, 999, 1001, 1<<40 + 1} {
		if s.has(id) {
			t.Errorf("has(%d) = true, never added", id)
		}
	}
}
