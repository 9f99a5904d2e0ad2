package store

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Loading a run from its log. The log alone rebuilds every record (doc.go),
// so a run copied out as its events and its turns (a Parquet lake) comes
// back by replaying them: RunLoader takes the events in order, then the
// turns, and rebuilds the records, indexes, counters and id sequences,
// then checks the run as Check would.

// RunLoader rebuilds one run in a DB from its events and turns. Use it from
// one goroutine: Event for every event in sequence order, then Turn for
// every turn, then Finish (or Abort). It writes in transactions of about
// LoadTxBytes, so the run is not held in memory; until Finish succeeds the
// run is incomplete, and Abort (or a failed Finish) deletes it.
type RunLoader struct {
	db   *DB
	id   string
	tx   *bolt.Tx
	size int64
	err  error

	lastSeq uint64
	maxID   map[string]uint64 // bucket → the largest id loaded into it
	turns   uint64            // the largest turn sequence number
	phase   int               // 0 events, 1 turns, 2 done
	node    *model.Node       // the node of the last turn loaded
}

// LoadTxBytes is how many bytes of keys and values a RunLoader writes per
// transaction.
const LoadTxBytes = 32 << 20

// LoadRun starts rebuilding run id, which must not exist (ErrExists). The
// run record comes from the events: each run event's record is renamed to
// id and loses its drop marks (the loaded run holds every step it is
// given).
func (db *DB) LoadRun(id string) (*RunLoader, error) {
	if db.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if !ValidRunID(id) {
		return nil, invalidf("run id %q: want 1-128 bytes of [A-Za-z0-9._-]", id)
	}
	l := &RunLoader{db: db, id: id, maxID: map[string]uint64{}}
	err := db.bolt.Update(func(btx *bolt.Tx) error {
		runs := btx.Bucket(bucketRuns)
		if runs.Bucket([]byte(id)) != nil {
			return existsf("run %q", id)
		}
		b, err := runs.CreateBucket([]byte(id))
		if err != nil {
			return err
		}
		for _, name := range append(subBuckets[:], bReplies) {
			if _, err := b.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return l, nil
}

// bucket returns the run's bucket (name "") or sub-bucket in the current
// transaction, beginning one when none is open.
func (l *RunLoader) bucket(name string) (*bolt.Bucket, error) {
	if l.tx == nil {
		tx, err := l.db.bolt.Begin(true)
		if err != nil {
			return nil, mapTxError(err)
		}
		l.tx = tx
	}
	b := l.tx.Bucket(bucketRuns).Bucket([]byte(l.id))
	if name == bScalars { // created by the first record, as PutScalars does
		return b.CreateBucketIfNotExists([]byte(name))
	}
	if name != "" {
		b = b.Bucket([]byte(name))
		if f, ok := fillPercent[name]; ok {
			b.FillPercent = f
		}
	}
	return b, nil
}

func (l *RunLoader) put(name string, k, v []byte) error {
	b, err := l.bucket(name)
	if err != nil {
		return err
	}
	l.size += int64(len(k) + len(v))
	return b.Put(k, v)
}

// commitIfFull commits the transaction once it holds LoadTxBytes.
func (l *RunLoader) commitIfFull() error {
	if l.size < LoadTxBytes {
		return nil
	}
	return l.commit()
}

func (l *RunLoader) commit() error {
	if l.tx == nil {
		return nil
	}
	tx := l.tx
	l.tx, l.size = nil, 0
	return mapTxError(tx.Commit())
}

func (l *RunLoader) fail(err error) error {
	if err != nil && l.err == nil {
		l.err = err
	}
	return err
}

// framedPayload is payload as a stored value.
func framedPayload(payload []byte) []byte {
	return frame(append(make([]byte, headerLen, headerLen+len(payload)), payload...))
}

// Event loads the next event of the log, as it was written (sequence
// number, time, kind, ids, payload), and for the store's own kinds the
// record it wrote. Sequence numbers must ascend; gaps are allowed (a log
// that dropped events).
func (l *RunLoader) Event(e model.Event) error {
	switch {
	case l.err != nil:
		return l.err
	case l.phase != 0:
		return invalidf("load: event %d after the turns", e.Seq)
	case e.Seq <= l.lastSeq:
		return l.fail(invalidf("load: event %d after event %d", e.Seq, l.lastSeq))
	}
	if err := l.apply(&e); err != nil {
		return l.fail(fmt.Errorf("load: event %d (%s): %w", e.Seq, e.Kind, err))
	}
	l.lastSeq = e.Seq
	if err := l.put(bEvents, u64key(e.Seq), encodeEvent(&e)); err != nil {
		return l.fail(err)
	}
	return l.fail(l.commitIfFull())
}

// apply writes the record a store event wrote (e's payload is rewritten
// for a run record, see LoadRun).
func (l *RunLoader) apply(e *model.Event) error {
	switch recordOf(e.Kind) {
	case recRun:
		var run model.Run
		if err := DecodePayload(*e, &run); err != nil {
			return err
		}
		run.ID, run.DroppedStep, run.DroppedSeq = l.id, 0, 0
		val, err := encodeValue(&run)
		if err != nil {
			return err
		}
		e.Payload = val[headerLen:]
		return l.put("", keyRun, val)
	case recGroup:
		var g model.Group
		if err := DecodePayload(*e, &g); err != nil {
			return err
		}
		l.seenID(bGroups, g.ID)
		return l.put(bGroups, u64key2(g.Step, g.ID), framedPayload(e.Payload))
	case recNode:
		var n model.Node
		if err := DecodePayload(*e, &n); err != nil {
			return err
		}
		l.seenID(bNodes, n.ID)
		if e.Kind == model.EvNodeAdd && n.Parent == 0 {
			if err := l.addRoot(&n); err != nil {
				return err
			}
		}
		return l.put(bNodes, u64key(n.ID), framedPayload(e.Payload))
	case recTurns:
		var p model.TurnsPayload
		if err := DecodePayload(*e, &p); err != nil {
			return err
		}
		n, err := l.readNode(e.Node)
		if err != nil {
			return err
		}
		p.Apply(n)
		if p.Seq != 0 && p.Count > 0 {
			l.turns = max(l.turns, p.Seq+uint64(p.Count)-1)
		}
		return l.put(bNodes, u64key(n.ID), encodeNode(n))
	case recAdvantage:
		var a model.Advantage
		if err := DecodePayload(*e, &a); err != nil {
			return err
		}
		return l.put(bAdv, u64key3(a.Step, a.Group, a.Leaf), framedPayload(e.Payload))
	case recRubric:
		rb := new(model.Rubric)
		if err := DecodePayload(*e, rb); err != nil {
			return err
		}
		l.seenID(bRubrics, rb.ID)
		return l.put(bRubrics, u64key(rb.ID), framedPayload(e.Payload))
	case recCheckpoint:
		var c model.Checkpoint
		if err := DecodePayload(*e, &c); err != nil {
			return err
		}
		return l.put(bCkpt, u64key(c.Step), framedPayload(e.Payload))
	case recScalars:
		var s model.Scalars
		if err := DecodePayload(*e, &s); err != nil {
			return err
		}
		return l.put(bScalars, u64key(s.Step), framedPayload(e.Payload))
	case recReply:
		var rep Reply
		if err := DecodePayload(*e, &rep); err != nil {
			return err
		}
		return l.put(bReplies, []byte(rep.Key), u64key(e.Seq))
	}
	return nil // a kind defined above the store: only the event
}

func (l *RunLoader) seenID(name string, id uint64) { l.maxID[name] = max(l.maxID[name], id) }

// readNode reads a loaded node record.
func (l *RunLoader) readNode(id uint64) (*model.Node, error) {
	b, err := l.bucket(bNodes)
	if err != nil {
		return nil, err
	}
	raw := b.Get(u64key(id))
	if raw == nil {
		return nil, invalidf("node %d, which no event created", id)
	}
	n := new(model.Node)
	if err := decodeValue("runs/"+l.id+"/"+bNodes, u64key(id), raw, n); err != nil {
		return nil, err
	}
	return n, nil
}

// addRoot lists a new root branch in its group, as AddNode does without
// a group event of its own.
func (l *RunLoader) addRoot(n *model.Node) error {
	b, err := l.bucket(bGroups)
	if err != nil {
		return err
	}
	k := u64key2(n.Step, n.Group)
	raw := b.Get(k)
	if raw == nil {
		return invalidf("root %d of group %d at step %d, which no event opened", n.ID, n.Group, n.Step)
	}
	var g model.Group
	if err := decodeValue("runs/"+l.id+"/"+bGroups, k, raw, &g); err != nil {
		return err
	}
	if slices.Contains(g.Roots, n.ID) {
		return nil
	}
	g.Roots = append(g.Roots, n.ID)
	val, err := encodeValue(&g)
	if err != nil {
		return err
	}
	return l.put(bGroups, k, val)
}

// Turn loads own turn index of node, once every event is loaded: it goes
// where the node's record says its turns are. Turns must come node by
// node, each node's in index order.
func (l *RunLoader) Turn(node uint64, index int, t model.Turn) error {
	if l.err != nil {
		return l.err
	}
	if l.phase == 2 {
		return invalidf("load: turn after Finish")
	}
	l.phase = 1
	if err := validTurn(&t); err != nil {
		return l.fail(fmt.Errorf("load: turn %d of node %d: %w", index, node, err))
	}
	if l.node == nil || l.node.ID != node {
		n, err := l.readNode(node)
		if err != nil {
			return l.fail(fmt.Errorf("load: turn %d: %w", index, err))
		}
		l.node = n
	}
	seq, ok := ownTurnSeq(l.node.TurnRanges, index)
	if !ok || index >= l.node.Turns {
		return l.fail(invalidf("load: turn %d of node %d, which has %d turns", index, node, l.node.Turns))
	}
	val, err := encodeTurn(&t)
	if err != nil {
		return l.fail(err)
	}
	l.turns = max(l.turns, seq)
	if err := l.put(bTurns, u64key2(seq, node), val); err != nil {
		return l.fail(err)
	}
	return l.fail(l.commitIfFull())
}

// ownTurnSeq is the sequence number of a node's own turn index.
func ownTurnSeq(rs model.TurnRanges, index int) (uint64, bool) {
	for _, rg := range rs {
		if index < rg.Count {
			return rg.Seq + uint64(index), true
		}
		index -= rg.Count
	}
	return 0, false
}

// Finish builds the children index, the frontier, the counters and group
// index and the id sequences from the loaded records, then checks the run
// (Check with CheckOptions.Run): any violation deletes it and is returned as ErrCorrupt
// naming the first one.
func (l *RunLoader) Finish() error {
	if l.err != nil {
		_ = l.Abort()
		return l.err
	}
	l.phase = 2
	err := l.index()
	if err == nil {
		err = l.commit()
	}
	if err == nil {
		err = l.db.Update(func(tx *Tx) error {
			r, err := tx.Run(l.id)
			if err != nil {
				return err
			}
			return r.Recount()
		})
	}
	if err == nil {
		err = l.db.View(func(tx *Tx) error {
			_, err := tx.Check(&CheckOptions{Run: l.id})
			return err
		})
	}
	if err != nil {
		l.err = err
		_ = l.Abort()
		return fmt.Errorf("load run %q: %w", l.id, err)
	}
	return nil
}

// index writes the children and frontier entries and the sequences.
func (l *RunLoader) index() error {
	nodes, err := l.bucket(bNodes)
	if err != nil {
		return err
	}
	type link struct{ parent, child uint64 }
	var links []link
	var active []uint64
	err = nodes.ForEach(func(k, v []byte) error {
		var n model.Node
		if err := decodeValue("runs/"+l.id+"/"+bNodes, k, v, &n); err != nil {
			return err
		}
		if n.Parent != 0 {
			links = append(links, link{n.Parent, n.ID})
		}
		if n.Status == model.NodeActive {
			active = append(active, n.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(links, func(a, b link) int { return cmp.Or(cmp.Compare(a.parent, b.parent), cmp.Compare(a.child, b.child)) })
	for _, lk := range links {
		if err := l.put(bChildren, u64key2(lk.parent, lk.child), []byte{}); err != nil {
			return err
		}
	}
	for _, id := range active {
		if err := l.put(bFrontier, u64key(id), []byte{}); err != nil {
			return err
		}
	}
	seqs := map[string]uint64{bGroups: l.maxID[bGroups], bNodes: l.maxID[bNodes], bRubrics: l.maxID[bRubrics],
		bTurns: l.turns, bEvents: l.lastSeq}
	for name, seq := range seqs {
		b, err := l.bucket(name)
		if err != nil {
			return err
		}
		if err := b.SetSequence(seq); err != nil {
			return err
		}
	}
	return nil
}

// Abort deletes the run being loaded.
func (l *RunLoader) Abort() error {
	if l.tx != nil {
		_ = l.tx.Rollback()
		l.tx = nil
	}
	l.phase = 2
	err := l.db.bolt.Update(func(btx *bolt.Tx) error {
		err := btx.Bucket(bucketRuns).DeleteBucket([]byte(l.id))
		if errors.Is(err, bolt.ErrBucketNotFound) {
			return nil
		}
		return err
	})
	return err
}
