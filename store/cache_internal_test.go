package store

import (
	"strconv"
	"testing"
)

// A key holds the run's tag and the node id in one word; a node id too
// large for it, or a run without a tag, is not cached rather than keyed
// onto another node.
func TestCacheKeyLeavesWhatDoesNotFit(t *testing.T) {
	for _, c := range []struct {
		tag, id uint64
		ok      bool
	}{
		{1, 1, true}, {maxTag, 1<<idBits - 1, true},
		{0, 1, false}, {1, 1 << idBits, false}, {2, 1<<idBits + 1, false},
	} {
		k, ok := cacheKey(c.tag, c.id)
		if ok != c.ok {
			t.Errorf("cacheKey(%d, %d) ok %t, want %t", c.tag, c.id, ok, c.ok)
		}
		if ok && (uint64(k)>>idBits != c.tag || uint64(k)&(1<<idBits-1) != c.id) {
			t.Errorf("cacheKey(%d, %d) = %x: does not hold both", c.tag, c.id, uint64(k))
		}
	}
	c := newNodeCache(8)
	if a, b := c.tag("a"), c.tag("b"); a == 0 || b == 0 || a == b || c.tag("a") != a {
		t.Errorf("tags a %d, b %d, a again %d: want two distinct tags, stable", a, b, c.tag("a"))
	}
	if newNodeCache(0).tag("a") != 0 {
		t.Error("a handle without a cache tagged a run")
	}
}

// Once a handle has tagged as many runs as a key can name, a run it meets
// after that gets no tag (its nodes are read from the file), and the runs
// tagged before keep theirs.
func TestCacheTagsRunOut(t *testing.T) {
	c := newNodeCache(8)
	first := c.tag("r0")
	for i := 1; i < maxTag; i++ {
		if c.tag("r"+strconv.Itoa(i)) == 0 {
			t.Fatalf("run %d of %d got no tag", i+1, maxTag)
		}
	}
	if got := c.tag("one too many"); got != 0 {
		t.Errorf("run %d got tag %d, want none", maxTag+1, got)
	}
	if c.tag("r0") != first {
		t.Error("a run tagged before lost its tag")
	}
}
