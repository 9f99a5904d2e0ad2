package store

// CheckReads puts a read transaction in checked mode, for a file nobody
// has checked (one another process wrote, copied in, or restored): bbolt
// trusts the pages it follows, and a damaged one can send a cursor into
// an endless loop or past the mapping. From then on every run handle
// the transaction hands out (Run, Runs) checks what each read touches
// before it returns: the pages its lookups follow, walked with bounds,
// and each record it returns against the records it links to (checked
// reads cost time in proportion to what is read, not to the run; see
// doc.go). A read that has no narrow check (the event log, a whole
// step's groups, summaries with bucket sizes, ...) checks the whole run
// once first (Check with CheckOptions.Run). Damage on the way is a
// *CorruptError and nothing is returned; damage elsewhere in the run does
// not stop a read that does not touch it. RunIDs checks the meta pages
// and the list of runs first.
//
// Call it before the transaction's first Run. A writable transaction
// cannot be checked (its changed pages are in memory, not where the walk
// reads): ErrInvalid. A damaged meta page is a *CorruptError here.
func (tx *Tx) CheckReads() error {
	if err := tx.check(false); err != nil {
		return err
	}
	if tx.Writable() {
		return invalidf("checked reads are for read transactions")
	}
	// A damaged meta page makes bbolt read the one before: an older file.
	if err := tx.verifyMetas(); err != nil {
		return err
	}
	tx.checkReads = true
	return nil
}

// checkedHandle is Run in checked mode: one handle per run and
// transaction, so what one read checked another does not check again.
func (tx *Tx) checkedHandle(id string) (*RunTx, error) {
	if r, ok := tx.checked[id]; ok {
		return r, nil
	}
	cr, err := tx.checkedRun(id)
	if err != nil {
		return nil, err
	}
	r := *cr.r // the plain handle's buckets, reading through cr
	r.chk = cr
	if tx.checked == nil {
		tx.checked = map[string]*RunTx{}
	}
	tx.checked[id] = &r
	return &r, nil
}

// whole checks the whole run once, on a handle in checked mode, before a
// read that has no narrow check; nil on a plain handle.
func (r *RunTx) whole() error {
	if r.chk == nil {
		return nil
	}
	_, err := r.chk.Sound()
	return err
}
