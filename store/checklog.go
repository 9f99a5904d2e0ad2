package store

import (
	"bytes"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"reflect"
	"slices"
)

// The log cross-check. Every mutation of the store's own kinds logs the
// record as it is after the mutation (node.turns logs the new turn count;
// adding a root updates its group without a group event), so replaying the
// payloads rebuilds every run, group, node, advantage, rubric and checkpoint
// record, and Check compares them with the buckets. It is the one check that
// sees a record vanish whole: a b-tree page whose element count lost its
// last entries is still a valid page, and nothing else points at an
// advantage, a rubric or a checkpoint. It also catches a record written
// without its event.

// The log is walked backwards, so the first event met for a record is the
// last that wrote it: the record is compared with it there, by a point
// read, and a bit per id remembers it was met. What the walk keeps besides
// is bounded by the records written since their last full event (turn
// counts of growing nodes, roots added to open groups), not by the run.

// logged remembers, per bucket, the ids whose last event was met.
type logged struct {
	run                                         bool
	groups, nodes, adv, rubrics, ckpts, scalars *idSet
	// The ids whose last event wrote a key that holds no record: a record
	// of theirs elsewhere is not the logged one (groups and advantages,
	// whose key holds more than their id).
	groupsMissing, advMissing *idSet
}

// pendingTurns are the turns events of a node after its last full event,
// newest first (each extends the node's turn ranges, so all of them apply).
type pendingTurns struct {
	seq uint64 // the newest
	ps  []model.TurnsPayload
}

func (c *checker) logMatches(r *RunTx) {
	path := r.bpath(bEvents)
	seq := func(name string) uint64 { return r.subBucket(name).Sequence() }
	seen := logged{groups: newIDSet(seq(bGroups)), nodes: newIDSet(seq(bNodes)), adv: newIDSet(seq(bNodes)),
		rubrics: newIDSet(seq(bRubrics)), ckpts: newIDSet(1 << 12), scalars: newIDSet(1 << 12),
		groupsMissing: newIDSet(seq(bGroups)), advMissing: newIDSet(seq(bNodes))}
	turns := map[uint64]pendingTurns{}
	roots := map[string][]uint64{} // group key → roots added after its last event, newest first
	var found []Violation
	inv := func(bucket string, key []byte, format string, args ...any) {
		if len(found) < maxViolations {
			found = append(found, Violation{Bucket: bucket, Key: key, Kind: "invariant", Detail: fmt.Sprintf(format, args...)})
		}
	}
	// compare checks the record at key in bucket b (the run's bucket when
	// name is "") against want, last written by event seq. payload is
	// want's encoding as the event holds it (nil when want differs from
	// it): a record whose payload is those very bytes decodes to want, so
	// it is not decoded again (the bucket's own walk checks its CRC). Most
	// records are their last event's payload, copied.
	compare := func(name string, key []byte, seq uint64, want any, payload []byte) (exists bool) {
		b, bpath := r.b, r.path
		if name == bScalars {
			b, bpath = r.scalarsBucket(), r.bpath(name)
		} else if name != "" {
			b, bpath = r.subBucket(name), r.bpath(name)
		}
		var raw []byte
		if b != nil {
			raw = b.Get(key)
		}
		if raw == nil {
			inv(bpath, cloneBytes(key), "record missing: event %d wrote it", seq)
			return false
		}
		if payload != nil && len(raw) >= headerLen && bytes.Equal(raw[headerLen:], payload) {
			return true
		}
		got := reflect.New(reflect.TypeOf(want).Elem()).Interface()
		if decodeValue(bpath, key, raw, got) != nil {
			return true // reported by the bucket's own check
		}
		if !reflect.DeepEqual(got, want) {
			inv(bpath, cloneBytes(key), "record differs from the event log (last written by event %d)", seq)
		}
		return true
	}
	clean := true
	var payloads payloadChunks
	cur := r.subBucket(bEvents).Cursor()
	for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
		c.progress(r, "log", 1)
		var e model.Event
		if decodeEvent(path, k, v, &e, &payloads) != nil {
			clean = false // reported by events()
			continue
		}
		switch recordOf(e.Kind) {
		case recNone:
			continue // a kind defined above the store
		case recReply:
			continue // a record of the log alone, indexed (checkreplies.go)
		case recRun:
			if seen.run {
				continue
			}
		case recTurns:
			if seen.nodes.has(e.Node) {
				continue
			}
		}
		rec := RecordFor(e.Kind)
		if err := DecodePayload(e, rec); err != nil {
			inv(path, cloneBytes(k), "%s payload does not decode: %v", e.Kind, err)
			clean = false
			continue
		}
		switch x := rec.(type) {
		case *model.Run:
			seen.run = true
			compare("", keyRun, e.Seq, x, e.Payload)
		case *model.Group:
			gk := string(u64key2(x.Step, x.ID))
			if seen.groups.has(x.ID) {
				continue
			}
			seen.groups.add(x.ID)
			for i := len(roots[gk]) - 1; i >= 0; i-- {
				x.Roots = append(x.Roots, roots[gk][i])
			}
			payload := e.Payload
			if len(roots[gk]) > 0 {
				payload = nil
			}
			delete(roots, gk)
			if !compare(bGroups, []byte(gk), e.Seq, x, payload) {
				seen.groupsMissing.add(x.ID)
			}
		case *model.Node:
			if e.Kind == model.EvNodeAdd && x.Parent == 0 && !seen.groups.has(x.Group) {
				gk := string(u64key2(x.Step, x.Group))
				roots[gk] = append(roots[gk], x.ID)
			}
			if seen.nodes.has(x.ID) {
				continue
			}
			seen.nodes.add(x.ID)
			last, payload := e.Seq, e.Payload
			if t, ok := turns[x.ID]; ok {
				for i := len(t.ps) - 1; i >= 0; i-- {
					t.ps[i].Apply(x)
				}
				last, payload = t.seq, nil
				delete(turns, x.ID)
			}
			compare(bNodes, u64key(x.ID), last, x, payload)
		case *model.TurnsPayload:
			t, ok := turns[e.Node]
			if !ok {
				t.seq = e.Seq
			}
			t.ps = append(t.ps, *x)
			turns[e.Node] = t
		case *model.Advantage:
			if seen.adv.has(x.Leaf) {
				continue
			}
			seen.adv.add(x.Leaf)
			if !compare(bAdv, u64key3(x.Step, x.Group, x.Leaf), e.Seq, x, e.Payload) {
				seen.advMissing.add(x.Leaf)
			}
		case *model.Rubric:
			if seen.rubrics.has(x.ID) {
				continue
			}
			seen.rubrics.add(x.ID)
			compare(bRubrics, u64key(x.ID), e.Seq, x, e.Payload)
		case *model.Checkpoint:
			if seen.ckpts.has(x.Step) {
				continue
			}
			seen.ckpts.add(x.Step)
			compare(bCkpt, u64key(x.Step), e.Seq, x, e.Payload)
		case *model.Scalars:
			if seen.scalars.has(x.Step) {
				continue
			}
			seen.scalars.add(x.Step)
			compare(bScalars, u64key(x.Step), e.Seq, x, e.Payload)
		}
	}
	if !clean {
		return // a damaged log rebuilds nothing reliable
	}
	for _, v := range found {
		c.add(v)
	}
	// Every record was written by an event.
	if r.b.Get(keyRun) != nil && !seen.run {
		c.inv(r.path, keyRun, "record is not in the event log")
	}
	unlogged := func(name string, keyLen, idAt int, ids, missing *idSet) {
		var dups []uint64 // ids with more than one record: only one can be the logged one
		if missing != nil {
			dups = c.duplicateIDs(r, name, keyLen, idAt)
		}
		var suspects [][]byte
		b := r.subBucket(name)
		if name == bScalars {
			b = r.scalarsBucket()
		}
		if b == nil {
			return
		}
		_ = b.ForEach(func(k, _ []byte) error {
			switch {
			case len(k) != keyLen || !ids.has(keyU64(k, idAt)):
			case missing != nil && missing.has(keyU64(k, idAt)):
			case slices.Contains(dups, keyU64(k, idAt)):
				suspects = append(suspects, cloneBytes(k))
				return nil
			default:
				return nil
			}
			c.inv(r.bpath(name), cloneBytes(k), "record is not in the event log")
			return nil
		})
		if len(suspects) == 0 {
			return
		}
		logged := c.loggedKeys(r, name, dups)
		for _, k := range suspects {
			if !bytes.Equal(logged[keyU64(k, idAt)], k) {
				c.inv(r.bpath(name), k, "record is not in the event log")
			}
		}
	}
	unlogged(bGroups, 16, 1, seen.groups, seen.groupsMissing)
	unlogged(bNodes, 8, 0, seen.nodes, nil)
	unlogged(bAdv, 24, 2, seen.adv, seen.advMissing)
	unlogged(bRubrics, 8, 0, seen.rubrics, nil)
	unlogged(bCkpt, 8, 0, seen.ckpts, nil)
	unlogged(bScalars, 8, 0, seen.scalars, nil)
}

// maxDuplicateIDs bounds the ids duplicateIDs returns: more than that many
// is a file too damaged for the detail to matter.
const maxDuplicateIDs = 1 << 10

// duplicateIDs lists the ids (the idAt-th u64 of the key) that more than
// one record of bucket name has.
func (c *checker) duplicateIDs(r *RunTx, name string, keyLen, idAt int) []uint64 {
	once := newIDSet(r.subBucket(bNodes).Sequence() + r.subBucket(bGroups).Sequence())
	var dups []uint64
	_ = r.subBucket(name).ForEach(func(k, _ []byte) error {
		if len(k) != keyLen {
			return nil
		}
		id := keyU64(k, idAt)
		if once.has(id) {
			if len(dups) < maxDuplicateIDs && !slices.Contains(dups, id) {
				dups = append(dups, id)
			}
			return nil
		}
		once.add(id)
		return nil
	})
	return dups
}

// loggedKeys returns the key the last event of each of ids wrote in bucket
// name (groups or advantages), walking the log backwards once more.
func (c *checker) loggedKeys(r *RunTx, name string, ids []uint64) map[uint64][]byte {
	out := map[uint64][]byte{}
	cur := r.subBucket(bEvents).Cursor()
	for k, v := cur.Last(); k != nil && len(out) < len(ids); k, v = cur.Prev() {
		var e model.Event
		if decodeValue(r.bpath(bEvents), k, v, &e) != nil {
			continue
		}
		switch rec := recordOf(e.Kind); {
		case name == bGroups && rec == recGroup:
			var g model.Group
			if DecodePayload(e, &g) == nil && slices.Contains(ids, g.ID) && out[g.ID] == nil {
				out[g.ID] = u64key2(g.Step, g.ID)
			}
		case name == bAdv && rec == recAdvantage:
			var a model.Advantage
			if DecodePayload(e, &a) == nil && slices.Contains(ids, a.Leaf) && out[a.Leaf] == nil {
				out[a.Leaf] = u64key3(a.Step, a.Group, a.Leaf)
			}
		}
	}
	return out
}
