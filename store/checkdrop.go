package store

import "github.com/patrdb/patrdb/model"

// The checks of a run that dropped old steps (drop.go): the run record's
// marks agree with each other and with the run, and no record of a
// dropped step is left.
func (c *checker) dropped(r *RunTx, info model.Run) {
	if info.DroppedStep == 0 && info.DroppedSeq == 0 {
		return
	}
	switch {
	case info.DroppedStep == 0 || info.DroppedSeq == 0:
		c.inv(r.path, keyRun, "dropped through step %d and event %d: one without the other", info.DroppedStep, info.DroppedSeq)
	case info.DroppedStep >= info.LastStep:
		c.inv(r.path, keyRun, "dropped through step %d, not before the last completed step %d", info.DroppedStep, info.LastStep)
	case info.DroppedSeq >= r.subBucket(bEvents).Sequence():
		c.inv(r.path, keyRun, "dropped through event %d, but the log ends at event %d", info.DroppedSeq, r.subBucket(bEvents).Sequence())
	}
	cur := r.subBucket(bCkpt).Cursor()
	for k, _ := cur.First(); k != nil && len(k) == 8 && keyU64(k, 0) <= info.DroppedStep; k, _ = cur.Next() {
		c.inv(r.bpath(bCkpt), cloneBytes(k), "checkpoint of step %d, which the run dropped (through step %d)", keyU64(k, 0), info.DroppedStep)
	}
}

// droppedCounts takes the counters of the dropped steps as they are
// stored: their records are gone, and the run's figures still count them.
// walked gets them, and its totals (step 0) their sum.
func droppedCounts(stored, walked map[uint64]*counts, through uint64) {
	if through == 0 {
		return
	}
	total := walked[0]
	if total == nil {
		total = new(counts)
		walked[0] = total
	}
	for step, s := range stored {
		if step == 0 || step > through {
			continue
		}
		w := *s
		walked[step] = &w
		total.add(s)
	}
}

// keepDroppedCounts adds to counters walked from the records those of the
// steps the run dropped, as stored: a recount must not forget them.
func (r *RunTx) keepDroppedCounts(walked map[uint64]*counts) error {
	run, err := r.Info()
	if err != nil || run.DroppedStep == 0 {
		return err
	}
	stored := map[uint64]*counts{}
	if b := r.b.Bucket([]byte(bCounts)); b != nil {
		c := b.Cursor()
		for k, v := c.Seek(u64key(1)); k != nil && len(k) == 8 && keyU64(k, 0) <= run.DroppedStep; k, v = c.Next() {
			cs := new(counts)
			if err := decodeValue(r.bpath(bCounts), k, v, cs); err != nil {
				return err
			}
			stored[keyU64(k, 0)] = cs
		}
	}
	droppedCounts(stored, walked, run.DroppedStep)
	return nil
}
