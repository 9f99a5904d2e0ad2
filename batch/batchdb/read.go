package batchdb

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/store"
)

// ReadDB reads the batch of a step of a run in one read transaction.
func ReadDB(db *store.DB, run string, step uint64, opts batch.Options) (*batch.Batch, error) {
	b := new(batch.Batch)
	err := db.ViewRun(run, func(r *store.RunTx) error {
		return ReadInto(b, r, step, opts)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Read reads the batch of a step inside the caller's transaction.
func Read(r *store.RunTx, step uint64, opts batch.Options) (*batch.Batch, error) {
	b := new(batch.Batch)
	if err := ReadInto(b, r, step, opts); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadInto is Read into dst, reusing its arrays' memory where it is large
// enough: a trainer that reads a batch per step allocates its buffers
// once. dst's previous contents are overwritten; on an error its fields
// are left as they were, but its arrays may have been cleared.
//
// A step without groups, or a chosen group not in the step, is
// model.ErrNotFound; damage is store.ErrCorrupt. On a handle of a
// transaction in checked mode (store.Tx.CheckReads) it checks only what
// the batch reads: damage elsewhere in the run does not stop it.
func ReadInto(dst *batch.Batch, r *store.RunTx, step uint64, opts batch.Options) error {
	return batch.Assemble(dst, opts, func(opts batch.Options) (*batch.Source, error) {
		return ReadSource(r, step, opts)
	})
}

// ReadSource reads what the batch of a step is built from (batch.Source):
// the step's groups, or opts.Groups, and the leaves of the closed ones
// that opts.Includes, with the turns on their paths. Its arrays alias the
// transaction's pages: they are valid until it ends. Its errors are
// ReadInto's.
func ReadSource(r *store.RunTx, step uint64, opts batch.Options) (*batch.Source, error) {
	rd := reader{r: r, opts: opts, src: &batch.Source{Run: r.ID(), Step: step}, need: map[uint64]int{}}
	if err := rd.collect(step); err != nil {
		return nil, err
	}
	if err := rd.view(); err != nil {
		return nil, err
	}
	return rd.src, nil
}

type reader struct {
	r    *store.RunTx
	opts batch.Options
	src  *batch.Source
	need map[uint64]int // turns of each node some row's path needs
}

func (rd *reader) collect(step uint64) error {
	var groups []model.Group
	if rd.opts.Groups == nil {
		var err error
		if groups, err = rd.r.Groups(step); err != nil {
			return err
		}
		if len(groups) == 0 {
			return fmt.Errorf("%w: step %d of run %q has no groups", model.ErrNotFound, step, rd.r.ID())
		}
	} else {
		ids := slices.Clone(rd.opts.Groups)
		slices.Sort(ids)
		for _, id := range slices.Compact(ids) {
			g, err := rd.r.GroupAt(step, id)
			if err != nil {
				return err
			}
			groups = append(groups, g)
		}
	}
	// The advantage records of the whole step are one cursor pass; of
	// chosen groups, one per group.
	advOf := map[uint64]float64{}
	addAdvs := func(group uint64) error {
		advs, err := rd.r.Advantages(step, group)
		for _, a := range advs {
			advOf[a.Leaf] = a.Advantage
		}
		return err
	}
	if rd.opts.Groups == nil {
		if err := addAdvs(0); err != nil {
			return err
		}
	}
	for _, g := range groups {
		if g.Status != model.GroupClosed {
			rd.src.Open = append(rd.src.Open, g.ID)
			continue
		}
		if rd.opts.Groups != nil {
			if err := addAdvs(g.ID); err != nil {
				return err
			}
		}
		if err := rd.addGroup(g, advOf); err != nil {
			return err
		}
	}
	return nil
}

// addGroup adds the leaves of one closed group, in leaf id order.
func (rd *reader) addGroup(g model.Group, advOf map[uint64]float64) error {
	gi := len(rd.src.Groups)
	rd.src.Groups = append(rd.src.Groups, batch.SourceGroup{ID: g.ID, PromptTokens: g.PromptTokens})
	nodes, err := rd.r.GroupNodes(g)
	if err != nil {
		return err
	}
	first := len(rd.src.Leaves)
	for _, n := range nodes {
		if !rd.opts.Includes(n.Status) {
			continue
		}
		path, err := rd.r.Path(n.ID)
		if err != nil {
			return err
		}
		for _, s := range path {
			rd.need[s.Node] = max(rd.need[s.Node], s.Count)
		}
		rd.src.Leaves = append(rd.src.Leaves, batch.SourceLeaf{ID: n.ID, Group: gi, Status: n.Status, Reward: n.Reward, Advantage: advOf[n.ID], Path: path})
	}
	slices.SortFunc(rd.src.Leaves[first:], func(a, b batch.SourceLeaf) int { return cmp.Compare(a.ID, b.ID) })
	return nil
}

// view takes every needed turn's token arrays, node by node in id order
// (turns are numbered as they are appended, a node's after its parent's,
// so the cursor walks mostly forward), and refuses a turn whose arrays
// do not hold together as damage.
func (rd *reader) view() error {
	segs := make([]model.Segment, 0, len(rd.need))
	for id, n := range rd.need {
		segs = append(segs, model.Segment{Node: id, Count: n})
	}
	slices.SortFunc(segs, func(a, b model.Segment) int { return cmp.Compare(a.Node, b.Node) })
	views, err := rd.r.ViewTurns(segs)
	if err != nil {
		return err
	}
	rd.src.Nodes = segs
	rd.src.Turns = make([]batch.SourceTurn, len(views))
	at := 0
	for _, s := range segs {
		for i, v := range views[at : at+s.Count] {
			t := batch.SourceTurn{ActionTokens: v.ActionTokens, ActionLogprobs: v.ActionLogprobs, ObservationTokens: v.ObservationTokens,
				Reward: v.Reward, PolicyVersion: v.PolicyVersion}
			if err := t.Check(); err != nil {
				return &store.CorruptError{Bucket: "runs/" + rd.r.ID() + "/turns", Reason: fmt.Sprintf("turn %d of node %d: %v", i, s.Node, err)}
			}
			rd.src.Turns[at+i] = t
		}
		at += s.Count
	}
	return nil
}
