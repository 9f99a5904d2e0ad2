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

// CheckOptions say what Check covers and who hears how it goes. Nil or
// the zero value checks everything: the meta pages, every page walked with
// bounds, bbolt's page accounting, every record's CRC and decoding, and
// every invariant of every run.
type CheckOptions struct {
	// Run, when set, limits the check to that run: its pages, then every
	// record of it against its links and its event log (not the meta
	// pages, the free pages or other runs). ErrNotFound when it does not
	// exist, unless Parts is set.
	Run string
	// Parts, when set, makes the check a walk of pages only, with bounds
	// and without reading a record: once it returns nil, cursors over
	// those pages terminate, and a damaged record among them is an
	// ErrCorrupt as it is decoded (each has a CRC). It costs time in
	// proportion to the parts, which is what a reader of a file nobody
	// has checked wants before it reads a few buckets of a big run. What
	// a walk cannot see is a record that disagrees with the records it
	// links to; the check without Parts sees that.
	Parts CheckParts
	// Progress, when set, is called as the check goes: at the start of
	// each part and every few thousand records. It runs on the checking
	// goroutine, inside the read transaction, so it should return quickly.
	Progress func(CheckProgress)
}

// CheckParts name what a walk of pages only covers (CheckOptions.Parts).
type CheckParts uint8

// The parts of the file a page walk covers. Those of a run need
// CheckOptions.Run; each of them walks the pages listing the runs too.
const (
	// CheckMetas: the two meta pages, on a read-only DB (on a writable
	// one this process's commits rewrite them, so they can be read torn
	// while one is written). bbolt reads the older one when the newer is
	// damaged: what a reader sees may be older than what was acknowledged.
	CheckMetas CheckParts = 1 << iota
	// CheckRunList: the pages a reader follows to list the runs (the
	// root, meta and runs buckets' own pages, not the runs' headers).
	CheckRunList
	// CheckPages: every page of Run's buckets (cursors and Bucket.Stats
	// over the run terminate), or, without Run, of every b-tree of the
	// snapshot, as a copy of the whole file (Compact) reads them.
	CheckPages
	// CheckSummary: the pages a run's summary and the small records
	// beside it read (the run record, every one of its counters,
	// rubrics, checkpoints, scalars, each sub-bucket's header), checked
	// path by path: a cold file is read where they lie, not whole. A
	// run without counters is summarised from its records, so then it
	// is CheckPages.
	CheckSummary
	// CheckLastEvent: the path to Run's last event, which must agree with
	// the events sequence (a summary's event count), and CheckSummary's.
	CheckLastEvent
	// CheckEvents: the pages of Run's event log, and CheckSummary's.
	CheckEvents
	// CheckAdvantages: the pages of Run's advantage records, and
	// CheckSummary's.
	CheckAdvantages
)

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
