package store

import (
	"bytes"
	"github.com/patrdb/patrdb/model"

	bolt "go.etcd.io/bbolt"
)

// Dropping old steps (retention). A long run's file would otherwise only
// grow: every step stays in it forever. Once a step's records are copied
// elsewhere (a Parquet lake), DropSteps deletes them, and bbolt reuses
// their pages for the steps to come, so a file that keeps the last N steps
// stops growing.
//
// What goes: the groups of the dropped steps with their nodes, turns,
// children and frontier entries, advantages and group-index entries; the
// checkpoints of those steps; and, among the events up to the dropped
// step's checkpoint, those that wrote a record that is gone, or one that a
// later event wrote again (old versions of the run record and of rubrics),
// the replies with their index entries (reply.go: a retry of a write that
// old is answered anew), and the events of kinds defined above the store
// stamped with a dropped step. What stays: every step after it, the
// rubrics and every step's scalars (each with the event that last wrote
// it), the last checkpoint,
// and the counters of every step, dropped ones included, so the run's
// figures still describe all of it.
//
// It is on record twice: the run record says how far the run was dropped
// (Run.DroppedStep, Run.DroppedSeq), and the event that wrote it has its own
// kind, EvRunDrop. Check holds a dropped run to every rule it holds any
// run to, except that events up to DroppedSeq may be missing and the
// counters of dropped steps are taken as they are.

// DropResult says what DropSteps deleted.
type DropResult struct {
	Through     uint64 `json:"through"` // the run is dropped through this step
	Seq         uint64 `json:"seq"`     // events up to this one may be gone
	Groups      int    `json:"groups"`
	Nodes       int    `json:"nodes"`
	Turns       int    `json:"turns"`
	Advantages  int    `json:"advantages"`
	Checkpoints int    `json:"checkpoints"`
	Events      int    `json:"events"`
}

// DropSteps deletes the records of every step up to and including
// through, which must be a checkpointed step before the run's last
// completed one (a trainer resumes from the last checkpoint, which stays),
// and past what the run already dropped. Copy the steps elsewhere first:
// nothing in the file keeps them. A step dropped already, or a through
// that is not checkpointed or not before LastStep, is ErrInvalid.
//
// It runs inside the caller's write transaction and deletes in memory
// until the commit, so drop a few steps at a time on a large run. Within
// the transaction, a node read before the drop may still be returned from
// the node cache; after the commit no reader sees a dropped record.
func (r *RunTx) DropSteps(through uint64) (DropResult, error) {
	res := DropResult{Through: through}
	if err := r.tx.check(true); err != nil {
		return res, err
	}
	run, err := r.Info()
	if err != nil {
		return res, r.tx.fail(err)
	}
	switch {
	case through <= run.DroppedStep:
		return res, r.tx.fail(invalidf("drop through step %d: run %q is dropped through step %d already", through, r.id, run.DroppedStep))
	case through >= run.LastStep:
		return res, r.tx.fail(invalidf("drop through step %d: run %q has completed step %d, whose checkpoint a resume needs: keep it", through, r.id, run.LastStep))
	}
	ckpts, err := r.bucket(bCkpt)
	if err != nil {
		return res, r.tx.fail(err)
	}
	if ckpts.Get(u64key(through)) == nil {
		return res, r.tx.fail(invalidf("drop through step %d: run %q has no checkpoint of step %d: drop through a checkpointed step", through, r.id, through))
	}
	seq, events, err := r.dropEvents(run.DroppedSeq, through)
	if err != nil {
		return res, r.tx.fail(err)
	}
	res.Seq, res.Events = seq, events
	if err := r.dropGroups(run.DroppedStep, through, &res); err != nil {
		return res, r.tx.fail(err)
	}
	var gone [][]byte
	c := ckpts.Cursor()
	for k, _ := c.First(); k != nil && len(k) == 8 && keyU64(k, 0) <= through; k, _ = c.Next() {
		gone = append(gone, cloneBytes(k))
	}
	for _, k := range gone {
		if err := ckpts.Delete(k); err != nil {
			return res, r.tx.fail(err)
		}
	}
	res.Checkpoints = len(gone)
	run.DroppedStep, run.DroppedSeq = through, seq
	run.UpdatedAt = r.tx.db.opts.now().UnixNano()
	return res, r.tx.fail(r.putRun(&run, model.EvRunDrop))
}

// dropEvents deletes the events after event from up to the checkpoint of
// step through that DropSteps drops (see the top of this file), and
// returns that checkpoint's sequence number and how many it deleted.
func (r *RunTx) dropEvents(from, through uint64) (cut uint64, n int, err error) {
	b, err := r.bucket(bEvents)
	if err != nil {
		return 0, 0, err
	}
	path := r.bpath(bEvents)
	// A rubric, and a step's scalars (which outlive their step), keep the
	// last event that wrote them; one met here is the last when the record
	// is still that event's payload.
	type lastWrite struct {
		key     []byte
		payload []byte
	}
	rubrics, scalars := map[uint64]lastWrite{}, map[uint64]lastWrite{}
	var gone [][]byte
	c := b.Cursor()
	for k, v := c.Seek(u64key(from + 1)); k != nil; k, v = c.Next() {
		var e model.Event
		if err := decodeEvent(path, k, v, &e, nil); err != nil {
			return 0, 0, err
		}
		drop := false
		switch recordOf(e.Kind) {
		case recRun:
			drop = true // the drop writes the run record again
		case recReply:
			drop = true
			if err := r.dropReply(e.Seq, e); err != nil {
				return 0, 0, err
			}
		case recRubric:
			if prev, ok := rubrics[e.Rubric]; ok {
				gone = append(gone, prev.key)
			}
			rubrics[e.Rubric] = lastWrite{cloneBytes(k), e.Payload}
		case recScalars:
			if prev, ok := scalars[e.Step]; ok {
				gone = append(gone, prev.key)
			}
			scalars[e.Step] = lastWrite{cloneBytes(k), e.Payload}
		default:
			// Group, node, turn, advantage and checkpoint events carry the
			// step of their record; other kinds the step they were written
			// for.
			drop = e.Step <= through
		}
		if drop {
			gone = append(gone, cloneBytes(k))
		}
		if e.Kind == model.EvCheckpoint && e.Step == through {
			cut = e.Seq
			break
		}
	}
	if cut == 0 {
		return 0, 0, &CorruptError{Bucket: path, Reason: "no event wrote the checkpoint of the step being dropped"}
	}
	rb, err := r.bucket(bRubrics)
	if err != nil {
		return 0, 0, err
	}
	keep := func(b *bolt.Bucket, writes map[uint64]lastWrite) {
		for id, w := range writes {
			var raw []byte
			if b != nil {
				raw = b.Get(u64key(id))
			}
			if raw != nil && len(raw) >= headerLen && bytes.Equal(raw[headerLen:], w.payload) {
				continue // still the record: keep it
			}
			gone = append(gone, w.key)
		}
	}
	keep(rb, rubrics)
	keep(r.scalarsBucket(), scalars)
	for _, k := range gone {
		if err := b.Delete(k); err != nil {
			return 0, 0, err
		}
	}
	return cut, len(gone), nil
}

// dropGroups deletes the groups of steps after from through through, with
// everything that hangs off them.
func (r *RunTx) dropGroups(from, through uint64, res *DropResult) error {
	groups, err := r.groupsBucket()
	if err != nil {
		return err
	}
	var gs []model.Group
	c := groups.Cursor()
	for k, v := c.Seek(u64key(from + 1)); k != nil; k, v = c.Next() {
		if len(k) != 16 {
			return &CorruptError{Bucket: r.bpath(bGroups), Key: cloneBytes(k), Reason: "group key is not 16 bytes"}
		}
		if keyU64(k, 0) > through {
			break
		}
		var g model.Group
		if err := decodeValue(r.bpath(bGroups), k, v, &g); err != nil {
			return err
		}
		gs = append(gs, g)
	}
	buckets := map[string]*bolt.Bucket{}
	for _, name := range []string{bNodes, bTurns, bChildren, bFrontier, bAdv} {
		b, err := r.bucket(name)
		if err != nil {
			return err
		}
		buckets[name] = b
	}
	ids := r.b.Bucket([]byte(bGroupIDs))
	for _, g := range gs {
		var nodes []*model.Node
		if err := r.walkGroupNodes(g, func(n *model.Node) error { nodes = append(nodes, n); return nil }); err != nil {
			return err
		}
		for _, n := range nodes {
			for _, rg := range n.TurnRanges {
				for i := range uint64(rg.Count) {
					if err := buckets[bTurns].Delete(u64key2(rg.Seq+i, n.ID)); err != nil {
						return err
					}
					res.Turns++
				}
			}
			if n.Parent != 0 {
				if err := buckets[bChildren].Delete(u64key2(n.Parent, n.ID)); err != nil {
					return err
				}
			}
			if err := buckets[bFrontier].Delete(u64key(n.ID)); err != nil {
				return err
			}
			if err := buckets[bNodes].Delete(u64key(n.ID)); err != nil {
				return err
			}
			r.droppedNodes = append(r.droppedNodes, n.ID)
			res.Nodes++
		}
		prefix := u64key2(g.Step, g.ID)
		var advs [][]byte
		ac := buckets[bAdv].Cursor()
		for k, _ := ac.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = ac.Next() {
			advs = append(advs, cloneBytes(k))
		}
		for _, k := range advs {
			if err := buckets[bAdv].Delete(k); err != nil {
				return err
			}
		}
		res.Advantages += len(advs)
		if ids != nil {
			if err := ids.Delete(u64key2(g.ID, g.Step)); err != nil {
				return err
			}
		}
		if err := groups.Delete(prefix); err != nil {
			return err
		}
		delete(r.groups, groupKey{g.Step, g.ID})
		r.lastGroup = nil
		delete(r.advFirst, groupKey{g.Step, g.ID})
		res.Groups++
	}
	return nil
}
