package batch

import (
	"math"

	"github.com/patrdb/patrdb/model"
)

// Assemble builds into dst the batch opts asks for from the Source read
// returns, reusing dst's arrays' memory where it is large enough: a
// trainer that builds a batch per step allocates its buffers once. It
// validates opts first and hands read opts with its defaults set; while
// read runs (a store read, a request), it clears dst's reused arrays on a
// goroutine of its own, so the two overlap. dst's previous contents are
// overwritten; on an error its fields are left as they were, but its
// arrays may have been cleared.
//
// A source that does not hold together is ErrSource; a value that does
// not fit its tensor, ErrOutOfRange. Assemble does not keep src: its
// arrays may alias memory that is reused once it returns.
func Assemble(dst *Batch, opts Options, read func(Options) (*Source, error)) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	opts = opts.WithDefaults()
	ahead := clearAhead(dst)
	defer ahead.wg.Wait() // the clear never outlives the call
	src, err := read(opts)
	if err != nil {
		return err
	}
	turnAt, err := src.validate()
	if err != nil {
		return err
	}
	bd := builder{src: src, opts: opts, turnAt: turnAt, segAt: map[segKey]int{}, ahead: ahead}
	if err := bd.checkIDs(); err != nil {
		return err
	}
	if err := bd.filter(); err != nil {
		return err
	}
	bd.plan()
	if err := bd.bounds(); err != nil {
		return err
	}
	bd.credit()
	*dst = Batch{Run: src.Run, Step: src.Step, Layout: opts.Layout, Credit: bd.cr.rule, Norm: bd.cr.norm,
		Groups: dst.Groups[:0], OpenGroups: dst.OpenGroups[:0],
		InputIDs: dst.InputIDs, LossMask: dst.LossMask, OldLogprobs: dst.OldLogprobs, Advantages: dst.Advantages, Positions: dst.Positions,
		CoefPos: dst.CoefPos, CoefNeg: dst.CoefNeg, LossWeight: dst.LossWeight,
		PolicyVersions: dst.PolicyVersions, TurnIndex: dst.TurnIndex, TurnRewards: dst.TurnRewards,
		LossTokens: bd.cr.tokens, LossRows: bd.cr.rows}
	for _, g := range src.Groups {
		dst.Groups = append(dst.Groups, g.ID)
	}
	dst.OpenGroups = append(dst.OpenGroups, src.Open...)
	bd.fill(dst)
	return nil
}

// row is a leaf that passed the policy window, with its path's range of
// policy versions.
type row struct {
	leaf       *SourceLeaf
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

// builder holds what Assemble computes on its way from a Source to a
// Batch.
type builder struct {
	src    *Source
	opts   Options
	rows   []row
	turnAt map[uint64]int // index in src.Turns of a node's turn 0

	segs    []seg
	segAt   map[segKey]int
	rowSegs []int   // each row's segments, root first, back to back
	rowEnd  []int   // row i's segments end at rowSegs[rowEnd[i]]
	tokens  []int64 // tokens of each row
	cr      credits
	ahead   *aheadClear
}

// turns are turns [from, to) of node.
func (bd *builder) turns(node uint64, from, to int) []SourceTurn {
	at := bd.turnAt[node]
	return bd.src.Turns[at+from : at+to]
}

// checkIDs refuses a token id that does not fit input_ids' int32: in the
// prompts, then in every turn a path takes, node by node, on GOMAXPROCS
// goroutines (it reads every token once), the first in node order
// winning.
func (bd *builder) checkIDs() error {
	for _, g := range bd.src.Groups {
		if i, ok := firstWide(g.PromptTokens); ok {
			return outOfRange("prompt token %d of group %d is %d", i, g.ID, g.PromptTokens[i])
		}
	}
	nodes := bd.src.Nodes
	tokens := make([]int64, len(nodes)+1)
	for i, n := range nodes {
		c := 0
		for _, t := range bd.turns(n.Node, 0, n.Count) {
			c += len(t.ActionTokens) + len(t.ObservationTokens)
		}
		tokens[i+1] = tokens[i] + int64(c/4)
	}
	errs := make([]error, len(nodes))
	inParallel(tokens, func(lo, hi int) tally {
		for _, n := range nodes[lo:hi] {
			if err := bd.checkTurnIDs(n); err != nil {
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

func (bd *builder) checkTurnIDs(n model.Segment) error {
	for i, t := range bd.turns(n.Node, 0, n.Count) {
		for _, ids := range []struct {
			what  string
			bytes []byte
		}{{"action", t.ActionTokens}, {"observation", t.ObservationTokens}} {
			if !idsFit(ids.bytes) {
				j, id := firstWideBytes(ids.bytes)
				return outOfRange("%s token %d of turn %d of node %d is %d", ids.what, j, i, n.Node, id)
			}
		}
	}
	return nil
}

// filter sets each row's policy-version range and drops the rows outside
// the window.
func (bd *builder) filter() error {
	bd.rows = make([]row, 0, len(bd.src.Leaves))
	for i := range bd.src.Leaves {
		l := &bd.src.Leaves[i]
		rw := row{leaf: l}
		first := true
		for _, s := range l.Path {
			for _, t := range bd.turns(s.Node, 0, s.Count) {
				if first || t.PolicyVersion < rw.vmin {
					rw.vmin = t.PolicyVersion
				}
				if first || t.PolicyVersion > rw.vmax {
					rw.vmax = t.PolicyVersion
				}
				first = false
			}
		}
		if rw.vmin < bd.opts.MinPolicyVersion || (bd.opts.MaxPolicyVersion != 0 && rw.vmax > bd.opts.MaxPolicyVersion) {
			continue
		}
		if rw.vmax > math.MaxInt64 {
			return outOfRange("policy version %d on the path of node %d exceeds the int64 policy_versions", rw.vmax, l.ID)
		}
		bd.rows = append(bd.rows, rw)
	}
	return nil
}
