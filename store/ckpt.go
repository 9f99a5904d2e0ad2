package store

// PutCheckpoint stores the trainer's state after step c.Step and, in the
// same transaction, marks that step the run's last completed one. Steps
// complete in order: c.Step must exceed the run's LastStep.
func (r *RunTx) PutCheckpoint(c Checkpoint) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	run, err := r.Info()
	if err != nil {
		return r.tx.fail(err)
	}
	if c.Step == 0 || c.Step <= run.LastStep {
		return r.tx.fail(invalidf("checkpoint for step %d: run %q has completed step %d", c.Step, r.id, run.LastStep))
	}
	if len(c.Inline) == 0 && c.URI == "" {
		return r.tx.fail(invalidf("checkpoint for step %d holds neither inline state nor a URI", c.Step))
	}
	b, err := r.bucket(bCkpt)
	if err != nil {
		return r.tx.fail(err)
	}
	c.CreatedAt = r.tx.db.opts.now().UnixNano()
	c.Inline = cloneBytes(c.Inline)
	val, err := encodeValue(&c)
	if err != nil {
		return r.tx.fail(err)
	}
	if err := b.Put(u64key(c.Step), val); err != nil {
		return r.tx.fail(err)
	}
	if err := r.appendEvent(Event{Kind: EvCheckpoint, Step: c.Step}, val); err != nil {
		return r.tx.fail(err)
	}
	run.LastStep = c.Step
	run.UpdatedAt = c.CreatedAt
	return r.tx.fail(r.putRun(&run, EvRunStatus))
}

// Checkpoint returns the latest checkpoint at or before step (0: the
// latest of all), or ErrNotFound.
func (r *RunTx) Checkpoint(step uint64) (Checkpoint, error) {
	var c Checkpoint
	b, err := r.bucket(bCkpt)
	if err != nil {
		return c, err
	}
	cur := b.Cursor()
	var k, v []byte
	if step == 0 {
		k, v = cur.Last()
	} else {
		k, v = cur.Seek(u64key(step))
		if k == nil || keyU64(k, 0) != step {
			k, v = cur.Prev()
			if k == nil {
				// Seek went past the end: Prev from there is the last key.
				k, v = cur.Last()
			}
		}
	}
	if k == nil || (step != 0 && keyU64(k, 0) > step) {
		return c, notFoundf("checkpoint at or before step %d of run %q", step, r.id)
	}
	err = decodeValue(r.bpath(bCkpt), k, v, &c)
	return c, err
}
