package store

import (
	"cmp"
	"maps"
	"slices"

	"github.com/patrdb/patrdb/model"
	bolt "go.etcd.io/bbolt"
)

// A write transaction keeps the groups it reads and writes: an interval
// reads its group once per call (AddNode, SetGroupInterval, PutAdvantage,
// CloseGroup) and rewrites it for every root added, so decoding and
// writing the record each time is most of what those calls cost. A group
// changed in the transaction is written once, when it flushes (Tx.flush),
// like the dirty nodes; its events are written as each change happens.

// txGroup is a group as this transaction last read or changed it.
type txGroup struct {
	g     model.Group
	val   []byte // its record's encoding, when an event already made it
	dirty bool   // changed since the record was last written
}

type groupKey struct{ step, id uint64 }

// groupRef returns the group, shared and read-only: the transaction's copy
// in a write transaction (decoded the first time), else freshly decoded.
// The group of the previous call is kept aside (lastGroup): a step's
// calls come group by group, and most find it without hashing the key.
func (r *RunTx) groupRef(step, id uint64) (*model.Group, error) {
	if tg := r.lastGroup; tg != nil && tg.g.ID == id && tg.g.Step == step {
		return &tg.g, nil
	}
	k := groupKey{step, id}
	if tg, ok := r.groups[k]; ok {
		r.lastGroup = tg
		return &tg.g, nil
	}
	g, err := r.readGroup(step, id)
	if err != nil || !r.tx.Writable() {
		return &g, err
	}
	if r.groups == nil {
		r.groups = map[groupKey]*txGroup{}
	}
	tg := &txGroup{g: g}
	r.groups[k] = tg
	r.lastGroup = tg
	return &tg.g, nil
}

// readGroup decodes a group's record from the groups bucket.
func (r *RunTx) readGroup(step, id uint64) (model.Group, error) {
	var g model.Group
	b, err := r.bucket(bGroups)
	if err != nil {
		return g, err
	}
	k := u64key2(step, id)
	raw := b.Get(k)
	if raw == nil {
		return g, notFoundf("group %d at step %d of run %q", id, step, r.id)
	}
	err = decodeValue(r.bpath(bGroups), k, raw, &g)
	return g, err
}

// setGroup makes g the transaction's copy of its group, to be written at
// flush; val is its encoding when the caller made one. The copy is
// overwritten in place, so what groupRef returned for the group reads g
// from now on; g may share its slices and map with the version it
// replaces, which is why nothing changes a group's slices or map in place.
func (r *RunTx) setGroup(g *model.Group, val []byte) {
	k := groupKey{g.Step, g.ID}
	if tg, ok := r.groups[k]; ok {
		tg.g, tg.val, tg.dirty = *g, val, true
		return
	}
	if r.groups == nil {
		r.groups = map[groupKey]*txGroup{}
	}
	r.groups[k] = &txGroup{g: *g, val: val, dirty: true}
}

// groupsBucket is the groups bucket with this transaction's changes
// written, for the readers that walk it.
func (r *RunTx) groupsBucket() (*bolt.Bucket, error) {
	if err := r.flushGroups(); err != nil {
		return nil, err
	}
	return r.bucket(bGroups)
}

// flushGroups writes the groups changed since the last flush, in key
// order.
func (r *RunTx) flushGroups() error {
	var todo []*txGroup
	for _, tg := range r.groups {
		if tg.dirty {
			todo = append(todo, tg)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	b, err := r.bucket(bGroups)
	if err != nil {
		return err
	}
	slices.SortFunc(todo, func(a, b *txGroup) int {
		return cmp.Or(cmp.Compare(a.g.Step, b.g.Step), cmp.Compare(a.g.ID, b.g.ID))
	})
	for _, tg := range todo {
		if tg.val == nil {
			tg.val = r.tx.groupValue(&tg.g)
		}
		if err := r.tx.put(b, u64key2(tg.g.Step, tg.g.ID), tg.val); err != nil {
			return err
		}
		tg.dirty = false
	}
	return nil
}

// cloneGroup is a deep copy: callers may change what GroupAt returns.
func cloneGroup(g *model.Group) model.Group {
	c := *g
	c.Roots = slices.Clone(g.Roots)
	c.Meta = maps.Clone(g.Meta)
	c.PromptTokens = slices.Clone(g.PromptTokens)
	return c
}

// groupValue is g's record, framed into the transaction's chunks.
func (tx *Tx) groupValue(g *model.Group) []byte {
	return tx.value(groupSizeHint(g), func(b []byte) []byte { return appendGroupMsgp(b, g) })
}
