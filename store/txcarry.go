package store

// What a write transaction hands the next one about the runs it wrote.
//
// A trainer writes one run, commit after commit, through one handle. Each
// write transaction used to begin by learning the run afresh: it compared
// every id sequence with its bucket's last record (sequences.go) and
// decoded the counters it tallies into (counts.go). Both are what the last
// commit left, and the last commit was this handle's own: it wrote the
// sequences with its records and the counters as they now stand. So a
// transaction whose snapshot is that commit takes them from it.
//
// The carry is keyed by the commit's txid. Anything else that commits —
// a load or a migration through bbolt directly — moves the file past it,
// and the next transaction learns the run afresh, as does one that follows
// a failed commit. A run the committing transaction did not bind is not
// carried, so nothing carried predates the commit it is keyed by.

// txCarry is what the last successful commit through Update carried.
type txCarry struct {
	txid uint64
	runs map[string]runCarry
}

// runCarry is one run as a committed transaction left it.
type runCarry struct {
	// counts are the run's counters as written (nil: the transaction
	// tallied nothing), trimmed to the totals and the step tallied last:
	// the records of any other step are decoded again when tallied.
	counts *runCounts
}

// carryOn records what the transaction, committed as txid, leaves the
// next (Update calls it after a successful commit, under writeMu).
func (tx *Tx) carryOn(txid uint64) {
	c := &tx.db.carry
	c.txid = txid
	clear(c.runs)
	for id, r := range tx.runs {
		if !r.sequencesOK || r.chk != nil {
			continue
		}
		if c.runs == nil {
			c.runs = make(map[string]runCarry, len(tx.runs))
		}
		c.runs[id] = runCarry{counts: r.counts.trimmed()}
	}
}

// dropCarry forgets the carry: the transaction did not commit, and may
// have changed what it took (Update calls it under writeMu).
func (db *DB) dropCarry() {
	db.carry.txid = 0
	clear(db.carry.runs)
}

// takeCarry gives r, just bound by a write transaction, what the last
// commit carried of its run, and reports whether there was any: then its
// sequences need no check. The entry leaves the carry, so that only one
// transaction ever changes the counters it holds.
func (tx *Tx) takeCarry(r *RunTx) bool {
	c := &tx.db.carry
	if c.txid == 0 || c.txid != tx.snapshot {
		return false
	}
	rc, ok := c.runs[r.id]
	if !ok {
		return false
	}
	delete(c.runs, r.id)
	if r.counts == nil {
		r.counts = rc.counts
	}
	return true
}

// trimmed is rc after its flush, holding the totals and the step tallied
// last: a long run's handle would otherwise keep every step's counters it
// ever touched.
func (rc *runCounts) trimmed() *runCounts {
	if rc == nil || len(rc.dirty) != 0 {
		return nil // not flushed: cannot be the file's
	}
	for step := range rc.byStep {
		if step != 0 && step != rc.lastStep {
			delete(rc.byStep, step)
		}
	}
	return rc
}
