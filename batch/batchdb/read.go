package batchdb

import (
	"cmp"
	"fmt"
	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
	"math"
	"slices"

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
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.WithDefaults()
	rd := reader{r: r, opts: opts, need: map[uint64]int{}, turnAt: map[uint64]int{}, segAt: map[segKey]int{}, ahead: clearAhead(dst)}
	defer rd.ahead.wg.Wait() // the clear never outlives the call
	if err := rd.collect(step); err != nil {
		return err
	}
	if err := rd.view(); err != nil {
		return err
	}
	if err := rd.filter(); err != nil {
		return err
	}
	rd.plan()
	if err := rd.bounds(); err != nil {
		return err
	}
	rd.credit()
	*dst = batch.Batch{Run: r.ID(), Step: step, Layout: opts.Layout, Credit: rd.cr.rule, Norm: rd.cr.norm,
		Groups: dst.Groups[:0], OpenGroups: dst.OpenGroups[:0],
		InputIDs: dst.InputIDs, LossMask: dst.LossMask, OldLogprobs: dst.OldLogprobs, Advantages: dst.Advantages, Positions: dst.Positions,
		CoefPos: dst.CoefPos, CoefNeg: dst.CoefNeg, LossWeight: dst.LossWeight,
		PolicyVersions: dst.PolicyVersions, TurnIndex: dst.TurnIndex, TurnRewards: dst.TurnRewards,
		LossTokens: rd.cr.tokens, LossRows: rd.cr.rows}
	for _, g := range rd.groups {
		dst.Groups = append(dst.Groups, g.ID)
	}
	dst.OpenGroups = append(dst.OpenGroups, rd.open...)
	rd.fill(dst)
	return nil
}

// leaf is what a row needs of its node record.
type leaf struct {
	ID     uint64
	Status model.NodeStatus
	Reward float64
}

type row struct {
	leaf       leaf
	group      int // index in reader.groups
	adv        float64
	path       []model.Segment
	vmin, vmax uint64
}

// seg is a segment: turns [from, to) of a node, or a group's prompt (node 0).
type seg struct {
	group    int
	node     uint64
	from, to int
	parent   int
	owner    int // row index: the first row, in leaf id order, that contains it
	tokens   int
	actions  int // action tokens among them
	depth    int // tokens before it in every sequence that contains it
	turn0    int // turns before it on every path that contains it
}

type segKey struct {
	node uint64
	to   int
}

type reader struct {
	r      *store.RunTx
	opts   batch.Options
	groups []model.Group
	open   []uint64
	rows   []row
	need   map[uint64]int   // turns of each node some row's path needs
	turnAt map[uint64]int   // index in refs of a node's turn 0
	refs   []store.TurnView // aliasing the transaction's pages

	segs    []seg
	segAt   map[segKey]int
	rowSegs []int   // each row's segments, root first, back to back
	rowEnd  []int   // row i's segments end at rowSegs[rowEnd[i]]
	tokens  []int64 // tokens of each row
	cr      credit
	ahead   *aheadClear
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
			rd.open = append(rd.open, g.ID)
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

// addGroup adds the rows of one closed group, in leaf id order.
func (rd *reader) addGroup(g model.Group, advOf map[uint64]float64) error {
	if i, ok := firstWide(g.PromptTokens); ok {
		return outOfRange("prompt token %d of group %d is %d", i, g.ID, g.PromptTokens[i])
	}
	gi := len(rd.groups)
	rd.groups = append(rd.groups, g)
	nodes, err := rd.r.GroupNodes(g)
	if err != nil {
		return err
	}
	first := len(rd.rows)
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
		rd.rows = append(rd.rows, row{leaf: leaf{n.ID, n.Status, n.Reward}, group: gi, adv: advOf[n.ID], path: path})
	}
	slices.SortFunc(rd.rows[first:], func(a, b row) int { return cmp.Compare(a.leaf.ID, b.leaf.ID) })
	return nil
}

// view takes every needed turn's token arrays, node by node in id order
// (turns are numbered as they are appended, a node's after its parent's,
// so the cursor walks mostly forward).
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
	rd.refs = views
	// The checks read every token once: on GOMAXPROCS goroutines, each
	// over its own nodes, the first error in node order winning.
	tokens := make([]int64, len(segs)+1)
	at := 0
	for i, s := range segs {
		rd.turnAt[s.Node] = at
		n := 0
		for _, v := range views[at : at+s.Count] {
			n += len(v.ActionTokens) + len(v.ObservationTokens)
		}
		tokens[i+1] = tokens[i] + int64(n/4)
		at += s.Count
	}
	errs := make([]error, len(segs))
	inParallel(tokens, func(lo, hi int) tally {
		for _, s := range segs[lo:hi] {
			if err := rd.checkTurns(s); err != nil {
				errs[lo] = err
				break
			}
		}
		return tally{}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkTurns checks the viewed turns of s: logprobs for every action
// token or none, every token id within int32.
func (rd *reader) checkTurns(s model.Segment) error {
	at := rd.turnAt[s.Node]
	for i, v := range rd.refs[at : at+s.Count] {
		if len(v.ActionLogprobs) != 0 && len(v.ActionLogprobs) != len(v.ActionTokens) {
			return &store.CorruptError{Bucket: "runs/" + rd.r.ID() + "/turns", Reason: fmt.Sprintf("turn %d of node %d: %d logprob bytes for %d action token bytes", i, s.Node, len(v.ActionLogprobs), len(v.ActionTokens))}
		}
		for _, ids := range []struct {
			what  string
			bytes []byte
		}{{"action", v.ActionTokens}, {"observation", v.ObservationTokens}} {
			if !idsFit(ids.bytes) {
				j, id := firstWideBytes(ids.bytes)
				return outOfRange("%s token %d of turn %d of node %d is %d", ids.what, j, i, s.Node, id)
			}
		}
	}
	return nil
}

// filter sets each row's policy-version range and drops the rows outside
// the window.
func (rd *reader) filter() error {
	kept := rd.rows[:0]
	for _, rw := range rd.rows {
		first := true
		for _, s := range rw.path {
			at := rd.turnAt[s.Node]
			for _, t := range rd.refs[at : at+s.Count] {
				if first || t.PolicyVersion < rw.vmin {
					rw.vmin = t.PolicyVersion
				}
				if first || t.PolicyVersion > rw.vmax {
					rw.vmax = t.PolicyVersion
				}
				first = false
			}
		}
		if rw.vmin < rd.opts.MinPolicyVersion || (rd.opts.MaxPolicyVersion != 0 && rw.vmax > rd.opts.MaxPolicyVersion) {
			continue
		}
		if rw.vmax > math.MaxInt64 {
			return outOfRange("policy version %d on the path of node %d exceeds the int64 policy_versions", rw.vmax, rw.leaf.ID)
		}
		kept = append(kept, rw)
	}
	rd.rows = kept
	return nil
}
