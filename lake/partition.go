package lake

import "github.com/patrdb/patrdb/model"

// The log's partitions. The log tables (runs, rubrics, events) put each
// event in the partition of the step the trainer was in when it was
// written: the highest step any event so far carried (but a trainer's
// figures, whose step is the trainer's own label), and at least the
// step after the last one the run record had completed. So a step's
// checkpoint and the run record it completes are in that step's partition,
// and every event after them in a later one: once a step is checkpointed,
// its part of the log never changes, and the export that adds the step
// adds all of it. A trainer that checkpoints every few steps still gets
// each step's events in its own partition.

// cursor is the partition state after an event.
type cursor struct {
	MaxStep  uint64 `json:"max_step"`  // the highest step an event carried
	LastStep uint64 `json:"last_step"` // the run record's last completed step
}

// advance returns e's partition and moves the cursor past it; run is the
// record e carries when it is a run event, nil otherwise.
func (c *cursor) advance(e model.Event, run *model.Run) uint64 {
	if e.Kind != model.EvScalars {
		// A trainer's figures name the step they describe in its own
		// numbering (a global optimizer step, samples seen), which says
		// nothing of where the rollouts are: a figure for step 1000 would
		// hold every later event out of the lake until step 1000 settled.
		c.MaxStep = max(c.MaxStep, e.Step)
	}
	step := max(c.MaxStep, c.LastStep+1)
	if run != nil {
		c.LastStep = max(c.LastStep, run.LastStep)
	}
	return step
}
