package store

import (
	"reflect"
	"sort"
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

type logKey struct {
	bucket string
	key    string
}

type logRecord struct {
	seq uint64 // the last event that wrote it
	rec any
}

func (c *checker) logMatches(r *RunTx) {
	want := map[logKey]*logRecord{}
	set := func(bucket string, key []byte, seq uint64, rec any) {
		want[logKey{bucket, string(key)}] = &logRecord{seq, rec}
	}
	path := r.bpath(bEvents)
	clean := true
	_ = r.sub[bEvents].ForEach(func(k, v []byte) error {
		var e Event
		if decodeValue(path, k, v, &e) != nil {
			clean = false // reported by events()
			return nil
		}
		var rec any
		switch e.Kind {
		case EvRunCreate, EvRunStatus:
			rec = new(Run)
		case EvGroupOpen, EvGroupUpdate, EvGroupClose:
			rec = new(Group)
		case EvNodeAdd, EvNodeScore, EvNodeRoute, EvNodeStatus, EvNodeReward, EvNodeEnvState:
			rec = new(Node)
		case EvTurns:
			rec = new(TurnsPayload)
		case EvAdvantage:
			rec = new(Advantage)
		case EvRubricPut, EvRubricUpdate, EvRubricMove:
			rec = new(Rubric)
		case EvCheckpoint:
			rec = new(Checkpoint)
		default:
			return nil // a kind defined above the store
		}
		if err := DecodePayload(e, rec); err != nil {
			c.inv(path, cloneBytes(k), "%s payload does not decode: %v", e.Kind, err)
			clean = false
			return nil
		}
		switch x := rec.(type) {
		case *Run:
			set("", keyRun, e.Seq, x)
		case *Group:
			set(bGroups, u64key2(x.Step, x.ID), e.Seq, x)
		case *Node:
			set(bNodes, u64key(x.ID), e.Seq, x)
			if e.Kind == EvNodeAdd && x.Parent == 0 {
				if g, ok := want[logKey{bGroups, string(u64key2(x.Step, x.Group))}]; ok {
					g.rec.(*Group).Roots = append(g.rec.(*Group).Roots, x.ID)
				}
			}
		case *TurnsPayload:
			if n, ok := want[logKey{bNodes, string(u64key(e.Node))}]; ok {
				x.Apply(n.rec.(*Node))
				n.seq = e.Seq
			}
		case *Advantage:
			set(bAdv, u64key3(x.Step, x.Group, x.Leaf), e.Seq, x)
		case *Rubric:
			set(bRubrics, u64key(x.ID), e.Seq, x)
		case *Checkpoint:
			set(bCkpt, u64key(x.Step), e.Seq, x)
		}
		return nil
	})
	if !clean {
		return // a damaged log rebuilds nothing reliable
	}
	compare := func(bucket, bpath string, k, v []byte, rec any) {
		lr, ok := want[logKey{bucket, string(k)}]
		if !ok {
			c.inv(bpath, cloneBytes(k), "record is not in the event log")
			return
		}
		delete(want, logKey{bucket, string(k)})
		if decodeValue(bpath, k, v, rec) != nil {
			return // reported by the bucket's own check
		}
		if !reflect.DeepEqual(rec, lr.rec) {
			c.inv(bpath, cloneBytes(k), "record differs from the event log (last written by event %d)", lr.seq)
		}
	}
	if v := r.b.Get(keyRun); v != nil {
		compare("", r.path, keyRun, v, new(Run))
	}
	for _, name := range []string{bGroups, bNodes, bAdv, bRubrics, bCkpt} {
		_ = r.sub[name].ForEach(func(k, v []byte) error {
			var rec any
			switch name {
			case bGroups:
				rec = new(Group)
			case bNodes:
				rec = new(Node)
			case bAdv:
				rec = new(Advantage)
			case bRubrics:
				rec = new(Rubric)
			case bCkpt:
				rec = new(Checkpoint)
			}
			compare(name, r.bpath(name), k, v, rec)
			return nil
		})
	}
	missing := make([]logKey, 0, len(want))
	for k := range want {
		missing = append(missing, k)
	}
	sort.Slice(missing, func(i, j int) bool {
		a, b := missing[i], missing[j]
		return a.bucket < b.bucket || (a.bucket == b.bucket && a.key < b.key)
	})
	for _, k := range missing {
		bpath := r.path
		if k.bucket != "" {
			bpath = r.bpath(k.bucket)
		}
		c.inv(bpath, []byte(k.key), "record missing: event %d wrote it", want[k].seq)
	}
}
