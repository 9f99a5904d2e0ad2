package store

// CheckProgress is where a running Check is: the run being read, the part
// of it ("pages", "groups", "nodes", "turns", "children", "advantages",
// "events", "log"), and how many of that part's records are done of about
// how many (Total 0: not known ahead).
type CheckProgress struct {
	Run   string
	Phase string
	Done  int64
	Total int64
}

// CheckOptions tune a check. The zero value checks with no reporting.
type CheckOptions struct {
	// Progress, when set, is called as the check goes: at the start of
	// each part and every few thousand records. It runs on the checking
	// goroutine, inside the read transaction, so it should return quickly.
	Progress func(CheckProgress)
}

// progressEvery is how many records pass between two Progress calls.
const progressEvery = 1 << 14

// progress counts n records of phase in run r, reporting at a phase's
// start and every progressEvery records.
func (c *checker) progress(r *RunTx, phase string, n int64) {
	if c.opts.Progress == nil {
		return
	}
	if phase != c.phase || r.id != c.runID {
		c.phase, c.runID, c.done = phase, r.id, 0
		c.opts.Progress(CheckProgress{Run: r.id, Phase: phase, Total: c.total(r, phase)})
	}
	c.done += n
	if c.done%progressEvery == 0 {
		c.opts.Progress(CheckProgress{Run: r.id, Phase: phase, Done: c.done, Total: c.total(r, phase)})
	}
}

// total is what a phase expects to read, from the run's counters and its
// event sequence; 0 when they do not say.
func (c *checker) total(r *RunTx, phase string) int64 {
	switch phase {
	case "events", "log":
		if b := r.subBucket(bEvents); b != nil {
			return int64(b.Sequence())
		}
		return 0
	}
	cb := r.b.Bucket([]byte(bCounts))
	if cb == nil {
		return 0
	}
	var t counts
	if raw := cb.Get(u64key(0)); raw == nil || decodeValue(r.bpath(bCounts), u64key(0), raw, &t) != nil {
		return 0
	}
	switch phase {
	case "groups":
		return t.Groups
	case "nodes":
		return t.nodes()
	case "turns":
		return t.Turns
	}
	return 0
}

// idSet is a set of record ids in one bit each, up to the sequence that
// handed them out; ids past it (a damaged file) go to a small map.
type idSet struct {
	bits  []uint64
	extra map[uint64]bool
}

// maxIDBits caps the bitset when a damaged sequence claims a huge id
// (32 MiB of bits).
const maxIDBits = 1 << 28

// maxExtraIDs caps the ids kept past the bitset.
const maxExtraIDs = 1 << 16

func newIDSet(seq uint64) *idSet {
	n := min(seq+1, maxIDBits)
	return &idSet{bits: make([]uint64, (n+63)/64), extra: map[uint64]bool{}}
}

func (s *idSet) add(id uint64) {
	if id/64 < uint64(len(s.bits)) {
		s.bits[id/64] |= 1 << (id % 64)
	} else if len(s.extra) < maxExtraIDs {
		s.extra[id] = true
	}
}

func (s *idSet) has(id uint64) bool {
	if id/64 < uint64(len(s.bits)) {
		return s.bits[id/64]&(1<<(id%64)) != 0
	}
	return s.extra[id]
}
