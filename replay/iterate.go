package replay

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Event is one entry of a run's log with its payload decoded by kind.
//
// Record holds, for the store's own kinds:
//
//	run.create, run.status                *model.Run
//	group.open, group.update, group.close *model.Group
//	node.add, node.score, node.route,
//	node.status, node.reward              *model.Node
//	node.turns                            *model.TurnsPayload
//	adv.put                               *model.Advantage
//	rubric.put, rubric.update, rubric.move *model.Rubric
//	ckpt.put                              *model.Checkpoint
//	scalars.put                           *model.Scalars
//
// each the record as it stood right after the event. Kinds written by
// packages above the store ("rubric.judge", ...) leave Record nil: their
// payload stays in Payload for the package that defined it to decode (see
// Event.Generic for a schema-less view).
type Event struct {
	model.Event
	Record any `json:"record,omitempty"`
}

// Decode decodes e's payload by its kind. A store kind whose payload does
// not decode is store.ErrCorrupt; other kinds are returned undecoded.
func Decode(e model.Event) (Event, error) {
	out := Event{Event: e}
	rec := store.RecordFor(e.Kind)
	if rec == nil {
		return out, nil
	}
	if err := store.DecodePayload(e, rec); err != nil {
		return out, fmt.Errorf("event %d (%s): %w", e.Seq, e.Kind, err)
	}
	out.Record = rec
	return out, nil
}

// Generic decodes the payload into plain Go values (maps, slices, numbers,
// strings) without knowing its schema; for displaying events of kinds
// defined above the store. An empty payload is nil.
func (e Event) Generic() (any, error) {
	if len(e.Payload) == 0 {
		return nil, nil
	}
	var v any
	if err := msgpack.Unmarshal(e.Payload, &v); err != nil {
		return nil, fmt.Errorf("event %d (%s): %w: payload: %v", e.Seq, e.Kind, store.ErrCorrupt, err)
	}
	return v, nil
}

// Iterate calls fn for every event of the run with from <= Seq <= to, in
// order, decoding one at a time so memory stays flat however long the log.
// from 0 means 1; to 0 means the last event. A from or to past the last
// event is ErrSeqRange (from may be one past the end: nothing is new yet),
// as is to < from. fn's error stops the walk and is returned as is.
func Iterate(r *store.RunTx, from, to uint64, fn func(Event) error) error {
	from, to, err := seqRange(r, from, to)
	if err != nil {
		return err
	}
	if from > to {
		return nil
	}
	err = r.Events(from, func(e model.Event) error {
		if e.Seq > to {
			return errStop
		}
		de, err := Decode(e)
		if err != nil {
			return err
		}
		return fn(de)
	})
	if err == errStop {
		return nil
	}
	return err
}

func seqRange(r *store.RunTx, from, to uint64) (uint64, uint64, error) {
	last := r.LastSeq()
	if from == 0 {
		from = 1
	}
	if to == 0 {
		to = last
		if from == last+1 {
			return from, from - 1, nil
		}
	}
	if from > last+1 {
		return 0, 0, fmt.Errorf("%w: from %d, run %q ends at event %d", ErrSeqRange, from, r.ID(), last)
	}
	if to > last {
		return 0, 0, fmt.Errorf("%w: to %d, run %q ends at event %d", ErrSeqRange, to, r.ID(), last)
	}
	if to < from {
		return 0, 0, fmt.Errorf("%w: to %d comes before from %d", ErrSeqRange, to, from)
	}
	return from, to, nil
}

// stopErr ends a walk early without being an error to the caller. It is a
// distinct type so no fn can return it by accident.
type stopErr struct{}

func (stopErr) Error() string { return "replay: stop" }

var errStop error = stopErr{}
