package lake

import (
	"context"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/store"
)

// RetainOptions configure Retain.
type RetainOptions struct {
	// KeepSteps is how many of the run's last checkpointed steps stay in
	// the file; at least 1 (the last checkpoint, which a resume needs).
	KeepSteps uint64
	// As is the run's name in the lake; "" is its id in the file.
	As string
}

// RetainResult says what Retain dropped.
type RetainResult struct {
	Run string `json:"run"`
	// Through is how far the file's run is dropped now (0: nothing).
	Through uint64 `json:"through"`
	// Dropped adds up what this call deleted.
	Dropped store.DropResult `json:"dropped"`
	// Waiting are the steps old enough to drop that the lake does not
	// hold yet: they are dropped once exported.
	Waiting []uint64 `json:"waiting,omitempty"`
}

// Retain drops from the file the steps of run id that are checkpointed,
// exported into the lake and older than the last KeepSteps checkpointed
// steps (store.RunTx.DropSteps), one checkpointed step per transaction,
// so bbolt reuses their pages and the file stops growing. The lake must
// hold the run, from this file (ErrNoRun, ErrConflict); the steps it does
// not hold yet stay (RetainResult.Waiting).
func (l *Lake) Retain(ctx context.Context, db *store.DB, id string, opts RetainOptions) (*RetainResult, error) {
	if opts.KeepSteps < 1 {
		return nil, fmt.Errorf("%w: keep at least 1 step (the last checkpoint, which a resume needs)", ErrOptions)
	}
	name := opts.As
	if name == "" {
		name = id
	}
	m, err := l.Manifest(ctx, name)
	if err != nil {
		return nil, err
	}
	return retain(ctx, db, id, m, opts.KeepSteps)
}

// retain drops what m says the lake holds, keeping the last keep steps.
func retain(ctx context.Context, db *store.DB, id string, m *Manifest, keep uint64) (*RetainResult, error) {
	res := &RetainResult{Run: m.Run}
	var steps []uint64 // the checkpointed steps to drop, in order
	err := db.ViewRun(id, func(r *store.RunTx) error {
		info, err := r.Info()
		if err != nil {
			return err
		}
		if src := sourceOf(info); src != m.Source {
			return &RunConflictError{Run: m.Run, Have: m.Source, Want: src}
		}
		res.Through = info.DroppedStep
		if info.LastStep <= keep {
			return nil
		}
		for s := info.DroppedStep + 1; s <= info.LastStep-keep; s++ {
			c, err := r.Checkpoint(s)
			if errors.Is(err, model.ErrNotFound) || (err == nil && c.Step != s) {
				continue
			}
			if err != nil {
				return err
			}
			if s > m.Step {
				res.Waiting = append(res.Waiting, s)
				continue
			}
			steps = append(steps, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var d store.DropResult
		err := db.UpdateRun(id, func(r *store.RunTx) error {
			var err error
			d, err = r.DropSteps(s)
			return err
		})
		if err != nil {
			return res, err
		}
		res.Through = s
		res.Dropped.Through, res.Dropped.Seq = d.Through, d.Seq
		res.Dropped.Groups += d.Groups
		res.Dropped.Nodes += d.Nodes
		res.Dropped.Turns += d.Turns
		res.Dropped.Advantages += d.Advantages
		res.Dropped.Checkpoints += d.Checkpoints
		res.Dropped.Events += d.Events
	}
	return res, nil
}
