package store

import "math"

// counters checks that the run's counters decode and, when its records
// checked clean (compare), that they and the group index agree with what
// the walks counted: over damaged records the counters would differ too,
// which says nothing new. A run without counters (written before they
// existed) has nothing to compare.
func (c *checker) counters(rc *runCheck, compare bool) {
	r := rc.r
	cb, ib := r.b.Bucket([]byte(bCounts)), r.b.Bucket([]byte(bGroupIDs))
	switch {
	case cb == nil && ib == nil:
		return
	case cb == nil || ib == nil:
		c.add(Violation{Bucket: r.path, Kind: "structure", Detail: "counters and group index must both exist or neither"})
		return
	}
	before := len(c.vs)
	stored := map[uint64]*counts{}
	_ = cb.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			c.inv(r.bpath(bCounts), cloneBytes(k), "key is not a step")
			return nil
		}
		cs := new(counts)
		if err := decodeValue(r.bpath(bCounts), k, v, cs); err != nil {
			c.fromErr(r.bpath(bCounts), err)
			return nil
		}
		stored[keyU64(k, 0)] = cs
		return nil
	})
	if !compare {
		return
	}
	// The group index names exactly the groups.
	indexed := 0
	_ = ib.ForEach(func(k, v []byte) error {
		if len(k) != 16 || len(v) != 0 {
			c.inv(r.bpath(bGroupIDs), cloneBytes(k), "entry is not group|step with an empty value")
			return nil
		}
		id, step := keyU64(k, 0), keyU64(k, 1)
		if r.subBucket(bGroups).Get(u64key2(step, id)) == nil {
			c.inv(r.bpath(bGroupIDs), cloneBytes(k), "index says group %d is at step %d; the groups say otherwise", id, step)
			return nil
		}
		indexed++
		return nil
	})
	if indexed != rc.groups {
		c.inv(r.bpath(bGroupIDs), nil, "index lists %d of the %d groups", indexed, rc.groups)
	}
	if len(c.vs) != before {
		return
	}
	walked := rc.tally.totals()
	droppedCounts(stored, walked, rc.dropped)
	c.sameCounts(r, stored, walked)
}

// sameCounts reports every step whose stored counters differ from the
// walked ones.
func (c *checker) sameCounts(r *RunTx, stored, walked map[uint64]*counts) {
	var empty counts
	for step, w := range walked {
		s := stored[step]
		if s == nil {
			s = &empty
		}
		if !s.equal(w) {
			c.inv(r.bpath(bCounts), u64key(step), "counters say %v; the records say %v", s, w)
		}
	}
	for step, s := range stored {
		if walked[step] == nil && !s.zero() {
			c.inv(r.bpath(bCounts), u64key(step), "counters say %v; the step has no records", s)
		}
	}
}

// equal compares exactly but for the reward sum, a float kept by adding
// and subtracting, which may differ from a fresh sum in its last bits.
func (c *counts) equal(o *counts) bool {
	a, b := *c, *o
	a.RewardSum, b.RewardSum = 0, 0
	if a != b {
		return false
	}
	d := math.Abs(c.RewardSum - o.RewardSum)
	return d <= 1e-9*math.Max(1, math.Max(math.Abs(c.RewardSum), math.Abs(o.RewardSum)))
}
