package store

import (
	"fmt"
	"slices"

	"github.com/patrdb/patrdb/model"
)

// Info returns the run's record.
func (r *RunTx) Info() (model.Run, error) {
	var run model.Run
	raw := r.b.Get(keyRun)
	if raw == nil {
		return run, &CorruptError{Bucket: r.path, Key: keyRun, Reason: "run record missing"}
	}
	err := decodeValue(r.path, keyRun, raw, &run)
	return run, err
}

func (r *RunTx) putRun(run *model.Run, kind model.EventKind) error {
	val, err := encodeValue(run)
	if err != nil {
		return err
	}
	if err := r.b.Put(keyRun, val); err != nil {
		return err
	}
	return r.appendEvent(model.Event{Kind: kind, Step: run.LastStep}, val)
}

// SetRunStatus moves the run to running, finished or failed.
func (r *RunTx) SetRunStatus(s model.RunStatus) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	switch s {
	case model.RunRunning, model.RunFinished, model.RunFailed:
	default:
		return r.tx.fail(invalidf("run status %q", s))
	}
	run, err := r.Info()
	if err != nil {
		return r.tx.fail(err)
	}
	run.Status = s
	run.UpdatedAt = r.tx.db.opts.now().UnixNano()
	return r.tx.fail(r.putRun(&run, model.EvRunStatus))
}

// SetConfig replaces the run's opaque config (JSON). Used when a resumed
// run records the configuration it continued with.
func (r *RunTx) SetConfig(config []byte) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	run, err := r.Info()
	if err != nil {
		return r.tx.fail(err)
	}
	run.Config = cloneBytes(config)
	run.UpdatedAt = r.tx.db.opts.now().UnixNano()
	return r.tx.fail(r.putRun(&run, model.EvRunStatus))
}

// PublishVersion records v as the run's current policy version: the
// weights a trainer just published to its samplers. Versions only go
// forward: an older v than the current one is ErrInvalid, so a late
// publish can never make newer turns look stale. Publishing the current
// version again writes nothing and succeeds: a trainer that crashed
// after its publish and resumed from the checkpoint before it publishes
// the same weights again.
func (r *RunTx) PublishVersion(v uint64) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	run, err := r.Info()
	if err != nil {
		return r.tx.fail(err)
	}
	if v == run.PolicyVersion && v != 0 {
		return nil
	}
	if v <= run.PolicyVersion {
		return r.tx.fail(invalidf("policy version %d: run %q is at version %d already; versions only go forward", v, r.id, run.PolicyVersion))
	}
	run.PolicyVersion = v
	run.UpdatedAt = r.tx.db.opts.now().UnixNano()
	return r.tx.fail(r.putRun(&run, model.EvRunVersion))
}

// BucketSizes walks the run's sub-buckets and reports their sizes. It reads
// every page of the run, so it costs time proportional to the run's size.
// In checked mode it walks those pages with bounds first, and reads no
// record.
func (r *RunTx) BucketSizes() ([]model.BucketSize, error) {
	if r.checking() {
		return r.chk.BucketSizes()
	}
	return r.bucketSizes()
}

func (r *RunTx) bucketSizes() ([]model.BucketSize, error) {
	out := make([]model.BucketSize, 0, len(subBuckets))
	pageSize := int64(r.tx.btx.DB().Info().PageSize)
	for _, name := range append(subBuckets[:], laterBuckets[:]...) {
		b := r.b.Bucket([]byte(name))
		if b == nil {
			if slices.Contains(laterBuckets[:], name) {
				continue // a run written before them
			}
			return nil, &CorruptError{Bucket: r.path, Reason: "missing sub-bucket " + name}
		}
		s := b.Stats()
		out = append(out, model.BucketSize{
			Name:  name,
			Keys:  s.KeyN,
			Bytes: int64(s.BranchPageN+s.BranchOverflowN+s.LeafPageN+s.LeafOverflowN)*pageSize + int64(s.InlineBucketInuse),
			Used:  int64(s.BranchInuse + s.LeafInuse + s.InlineBucketInuse),
		})
	}
	return out, nil
}

func (r *RunTx) String() string { return fmt.Sprintf("run %q", r.id) }
