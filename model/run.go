package model

// RunStatus is the lifecycle state of a run.
type RunStatus string

const (
	RunRunning  RunStatus = "running"
	RunFinished RunStatus = "finished"
	RunFailed   RunStatus = "failed"
)

// MaxStep is the largest step number. Steps run from 1 to 2^53 - 1: every
// JSON reader reads them exactly (JavaScript's numbers are doubles), and a
// run never takes that many (at a step a second, 285 million years), so no
// checkpointed step leaves a run without a next one (as 2^64 - 1 did).
const MaxStep = 1<<53 - 1

// Run is one training run. Steps are numbered from 1; LastStep 0 means no
// step has completed.
type Run struct {
	_msgpack  struct{}          `msgpack:",as_array"`
	ID        string            `json:"id"`
	Config    []byte            `json:"config"` // JSON of the trainer's tree and rubric configuration, opaque to the store
	Status    RunStatus         `json:"status"`
	LastStep  uint64            `json:"last_step"`
	CreatedAt int64             `json:"created_at"` // unix nanoseconds
	UpdatedAt int64             `json:"updated_at"`
	Meta      map[string]string `json:"meta,omitempty"`
	// PolicyVersion is the run's current policy version: the newest
	// weights the trainer published (RunTx.PublishVersion), against which
	// the staleness of sampled turns is measured. 0 until one is published
	// (format 4 on).
	PolicyVersion uint64 `json:"policy_version"`
	// DroppedStep and DroppedSeq say how far DropSteps deleted the run's
	// old steps: every record of the steps up to DroppedStep, and events
	// up to DroppedSeq that those records or later versions made
	// redundant (drop.go). Zero: nothing was dropped.
	DroppedStep uint64 `json:"dropped_step,omitempty"`
	DroppedSeq  uint64 `json:"dropped_seq,omitempty"`
}

// BucketSize is the on-disk footprint of one of a run's buckets.
type BucketSize struct {
	Name  string `json:"name"`
	Keys  int    `json:"keys"`
	Bytes int64  `json:"bytes"` // pages allocated to the bucket (branch + leaf + inline)
	Used  int64  `json:"used"`  // bytes in use within those pages
}
