package rubricpool

import (
	"fmt"
	"github.com/patrdb/patrdb/model"
	"reflect"

	"github.com/patrdb/patrdb/store"
)

// GroupResult is a prepared group: the shaping the caller folds into its
// advantages, a summary of what the pool decided, and the writes Apply
// makes. It is inert until applied.
type GroupResult struct {
	Step  uint64
	Group uint64
	// Scores is the centred rubric score of each trajectory, aligned with
	// the trajectories given to Prepare; all zero when no rubric scored the
	// group. The shaped reward is Reward + Lambda·Score.
	Scores []float64
	// The pool's decision (lambda, the rubrics that scored, zero variance
	// and unlocking, admissions, consolidation, retirements), served over
	// HTTP as it is.
	model.PoolDecision
	JudgeCalls int // judge calls made (active rubrics and drafts)

	run  string
	base []model.Rubric // the rubrics Prepare decided on
	ops  []op
}

type opKind uint8

const (
	opPut opKind = iota + 1
	opUpdate
	opMove
	opEvent
)

// op is one write of a prepared group, replayed in order by Apply. Rubric
// records are snapshots taken when the op was planned, so each write (and
// the store event it makes) shows the rubric as it was at that point.
type op struct {
	kind    opKind
	rubric  model.Rubric
	move    store.RubricMove
	event   model.EventKind
	target  uint64 // the event's rubric
	payload any
}

// Apply writes the group's pool changes and events in the caller's
// transaction, normally the one that writes the group's advantages, so the
// two commit or vanish together. It first checks that the stored rubrics
// are exactly those Prepare decided on and returns ErrStale, writing
// nothing, when they are not. A write error poisons the transaction (the
// store rolls it back), so a failed Apply never half-writes.
//
// Apply may be called again with the same result in a new transaction
// after the first one rolled back; once one has committed, the stored pool
// has moved on (or, for a group that changed nothing, only its events
// would repeat) — prepare again instead.
func (g *GroupResult) Apply(r *store.RunTx) error {
	if g == nil || g.run == "" {
		return inputf("Apply of a GroupResult that Prepare did not return")
	}
	if r.ID() != g.run {
		return inputf("GroupResult of run %q applied to run %q", g.run, r.ID())
	}
	cur, err := r.Rubrics("")
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(cur, g.base) {
		return fmt.Errorf("%w: step %d group %d: prepare it again", ErrStale, g.Step, g.Group)
	}
	for _, o := range g.ops {
		switch o.kind {
		case opPut:
			_, err = r.PutRubric(o.rubric)
		case opUpdate:
			err = r.UpdateRubric(o.rubric)
		case opMove:
			_, err = r.MoveRubric(o.rubric.ID, o.move)
		case opEvent:
			_, err = r.AppendEvent(o.event, g.Step, g.Group, 0, o.target, o.payload)
		}
		if err != nil {
			return fmt.Errorf("rubricpool: apply step %d group %d: %w", g.Step, g.Group, err)
		}
	}
	return nil
}
