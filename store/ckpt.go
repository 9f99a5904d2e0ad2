package store

import (
	"fmt"

	"github.com/patrdb/patrdb/model"
)

// PutCheckpoint stores the trainer's state after step c.Step and, in the
// same transaction, marks that step the run's last completed one. Steps
// complete in order: c.Step must exceed the run's LastStep, or the
// checkpoint is ErrStepCompleted.
func (r *RunTx) PutCheckpoint(c model.Checkpoint) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	run, err := r.Info()
	if err != nil {
		return r.tx.fail(err)
	}
	if err := validStep(c.Step); err != nil {
		return r.tx.fail(err)
	}
	if c.Step <= run.LastStep {
		return r.tx.fail(fmt.Errorf("%w: checkpoint for step %d: run %q has completed step %d; a checkpoint must be for a later step", ErrStepCompleted, c.Step, r.id, run.LastStep))
	}
	if len(c.Inline) == 0 && c.URI == "" {
		return r.tx.fail(invalidf("checkpoint for step %d holds neither inline state nor a URI", c.Step))
	}
	if err := r.noOpenGroups(run.LastStep+1, c.Step); err != nil {
		return r.tx.fail(err)
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
	if err := r.appendEvent(model.Event{Kind: model.EvCheckpoint, Step: c.Step}, val); err != nil {
		return r.tx.fail(err)
	}
	run.LastStep = c.Step
	run.UpdatedAt = c.CreatedAt
	return r.tx.fail(r.putRun(&run, model.EvRunStatus))
}

// noOpenGroups refuses to complete steps from..to while one of their groups
// is open: its active branches would be orphaned, never resumed (Resume
// looks only past the last completed step). A trainer that gives up on a
// step abandons it first (tree.Coordinator.Abandon), which is on record.
func (r *RunTx) noOpenGroups(from, to uint64) error {
	b, err := r.groupsBucket()
	if err != nil {
		return err
	}
	c := b.Cursor()
	for k, v := c.Seek(u64key(from)); k != nil; k, v = c.Next() {
		if len(k) != 16 {
			return &CorruptError{Bucket: r.bpath(bGroups), Key: cloneBytes(k), Reason: "group key is not 16 bytes"}
		}
		if keyU64(k, 0) > to {
			break
		}
		var g model.Group
		if err := decodeValue(r.bpath(bGroups), k, v, &g); err != nil {
			return err
		}
		if g.Status == model.GroupOpen {
			return invalidf("step %d has open group %d: finish or abandon it before the checkpoint that completes step %d", g.Step, g.ID, to)
		}
	}
	return nil
}

// Checkpoint returns the latest checkpoint at or before step (0: the
// latest of all), or ErrNotFound.
func (r *RunTx) Checkpoint(step uint64) (model.Checkpoint, error) {
	if r.checking() {
		return r.chk.Checkpoint(step)
	}
	var c model.Checkpoint
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
