package batch

import (
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/patrdb/patrdb/batch/safetensors"
	"github.com/patrdb/patrdb/store"
)

// ReadDB reads the batch of a step of a run in one read transaction.
func ReadDB(db *store.DB, run string, step uint64, opts Options) (*Batch, error) {
	b := new(Batch)
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		return ReadInto(b, r, step, opts)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Read reads the batch of a step inside the caller's transaction.
func Read(r *store.RunTx, step uint64, opts Options) (*Batch, error) {
	b := new(Batch)
	if err := ReadInto(b, r, step, opts); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadInto is Read into dst, reusing its arrays' memory where it is large
// enough: a trainer that reads a batch per step allocates its buffers
// once. dst's previous contents are overwritten.
//
// A step without groups, or a chosen group not in the step, is
// store.ErrNotFound; damage is store.ErrCorrupt.
func ReadInto(dst *Batch, r *store.RunTx, step uint64, opts Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	rd := reader{r: r, opts: opts, need: map[uint64]int{}, turnAt: map[uint64]int{}, segAt: map[segKey]int{}}
	if err := rd.collect(step); err != nil {
		return err
	}
	if err := rd.view(); err != nil {
		return err
	}
	rd.filter()
	rd.plan()
	*dst = Batch{Run: r.ID(), Step: step, Layout: opts.layout(), Groups: dst.Groups[:0], OpenGroups: dst.OpenGroups[:0],
		InputIDs: dst.InputIDs, LossMask: dst.LossMask, OldLogprobs: dst.OldLogprobs, Advantages: dst.Advantages, Positions: dst.Positions}
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
	Status store.NodeStatus
	Reward float64
}

type row struct {
	leaf       leaf
	group      int // index in reader.groups
	adv        float64
	path       []store.Segment
	vmin, vmax uint64
}

// seg is a segment: turns [from, to) of a node, or a group's prompt (node 0).
type seg struct {
	group    int
	node     uint64
	from, to int
	parent   int
	owner    int // row index
	tokens   int
	depth    int // tokens before it in every sequence that contains it
}

type segKey struct {
	node uint64
	to   int
}

type reader struct {
	r      *store.RunTx
	opts   Options
	groups []store.Group
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
}

func (rd *reader) collect(step uint64) error {
	var groups []store.Group
	if rd.opts.Groups == nil {
		err := rd.r.ForEachGroup(step, func(g store.Group) error {
			groups = append(groups, g)
			return nil
		})
		if err != nil {
			return err
		}
		if len(groups) == 0 {
			return fmt.Errorf("%w: step %d of run %q has no groups", store.ErrNotFound, step, rd.r.ID())
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
		if g.Status != store.GroupClosed {
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
func (rd *reader) addGroup(g store.Group, advOf map[uint64]float64) error {
	gi := len(rd.groups)
	rd.groups = append(rd.groups, g)
	nodes, err := rd.r.GroupNodes(g)
	if err != nil {
		return err
	}
	first := len(rd.rows)
	for _, n := range nodes {
		if !rd.opts.includes(n.Status) {
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
	slices.SortFunc(rd.rows[first:], func(a, b row) int { return int64cmp(a.leaf.ID, b.leaf.ID) })
	return nil
}

func int64cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// view takes every needed turn's token arrays, node by node in id order
// (turn keys are node|index, so the cursor walks forward).
func (rd *reader) view() error {
	segs := make([]store.Segment, 0, len(rd.need))
	for id, n := range rd.need {
		segs = append(segs, store.Segment{Node: id, Count: n})
	}
	slices.SortFunc(segs, func(a, b store.Segment) int { return int64cmp(a.Node, b.Node) })
	views, err := rd.r.ViewTurns(segs)
	if err != nil {
		return err
	}
	rd.refs = views
	at := 0
	for _, s := range segs {
		rd.turnAt[s.Node] = at
		for i, v := range views[at : at+s.Count] {
			if len(v.ActionLogprobs) != 0 && len(v.ActionLogprobs) != len(v.ActionTokens) {
				return &store.CorruptError{Bucket: "runs/" + rd.r.ID() + "/turns", Reason: fmt.Sprintf("turn %d of node %d: %d logprob bytes for %d action token bytes", i, s.Node, len(v.ActionLogprobs), len(v.ActionTokens))}
			}
		}
		at += s.Count
	}
	return nil
}

// filter sets each row's policy-version range and drops the rows outside
// the window.
func (rd *reader) filter() {
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
		kept = append(kept, rw)
	}
	rd.rows = kept
}

// plan cuts each group's nodes into segments and gives each segment its
// owner: rows are visited in leaf id order within a group, so the first
// row to reach a segment is the one with the smallest leaf id.
func (rd *reader) plan() {
	rd.rowEnd = make([]int, len(rd.rows))
	rd.tokens = make([]int64, len(rd.rows))
	cuts := map[uint64][]int{}
	for lo := 0; lo < len(rd.rows); {
		hi := lo
		for hi < len(rd.rows) && rd.rows[hi].group == rd.rows[lo].group {
			hi++
		}
		clear(cuts)
		for _, rw := range rd.rows[lo:hi] {
			for _, s := range rw.path {
				if s.Count > 0 {
					cuts[s.Node] = append(cuts[s.Node], s.Count)
				}
			}
		}
		for id, c := range cuts {
			slices.Sort(c)
			cuts[id] = slices.Compact(c)
		}
		g := rd.groups[rd.rows[lo].group]
		prompt := len(rd.segs)
		rd.segs = append(rd.segs, seg{group: rd.rows[lo].group, parent: -1, owner: lo, tokens: len(g.PromptTokens)})
		for ri := lo; ri < hi; ri++ {
			prev := prompt
			rd.rowSegs = append(rd.rowSegs, prompt)
			for _, s := range rd.rows[ri].path {
				from := 0
				for _, c := range cuts[s.Node] {
					if c > s.Count {
						break
					}
					k := segKey{s.Node, c}
					si, ok := rd.segAt[k]
					if !ok {
						si = len(rd.segs)
						p := rd.segs[prev]
						rd.segs = append(rd.segs, seg{group: p.group, node: s.Node, from: from, to: c, parent: prev,
							owner: ri, tokens: rd.turnTokens(s.Node, from, c), depth: p.depth + p.tokens})
						rd.segAt[k] = si
					}
					rd.rowSegs = append(rd.rowSegs, si)
					prev, from = si, c
				}
			}
			rd.rowEnd[ri] = len(rd.rowSegs)
			last := rd.segs[prev]
			rd.tokens[ri] = int64(last.depth + last.tokens)
		}
		lo = hi
	}
}

func (rd *reader) turnTokens(node uint64, from, to int) int {
	n := 0
	at := rd.turnAt[node]
	for _, t := range rd.refs[at+from : at+to] {
		n += (len(t.ActionTokens) + len(t.ObservationTokens)) / 4
	}
	return n
}

// fill sizes the token arrays once and writes every element exactly once.
func (rd *reader) fill(b *Batch) {
	nr := len(rd.rows)
	b.RowLeaf, b.RowGroup = make([]int64, nr), make([]int64, nr)
	b.RowStatus, b.RowReward, b.RowAdvantage = make([]uint8, nr), make([]float64, nr), make([]float64, nr)
	b.RowPolicyMin, b.RowPolicyMax = make([]int64, nr), make([]int64, nr)
	for i, rw := range rd.rows {
		b.RowLeaf[i], b.RowGroup[i] = int64(rw.leaf.ID), int64(rd.groups[rw.group].ID)
		b.RowStatus[i], b.RowReward[i] = statusCodes[rw.leaf.Status], rw.leaf.Reward
		if rw.leaf.Status != store.NodeFailed {
			b.RowAdvantage[i] = rw.adv
		}
		b.RowPolicyMin[i], b.RowPolicyMax[i] = int64(rw.vmin), int64(rw.vmax)
		b.TokensMaterialised += rd.tokens[i]
	}
	for _, s := range rd.segs {
		b.TokensPacked += int64(s.tokens)
	}
	// Positions are copied from one ascending run, as long as the longest
	// row, rather than counted token by token.
	longest := int64(0)
	for _, t := range rd.tokens {
		longest = max(longest, t)
	}
	iota := make([]int32, longest)
	for i := range iota {
		iota[i] = int32(i)
	}
	n := b.TokensPacked
	if b.Layout == Rows {
		n = b.TokensMaterialised
	}
	// Arrays grow makes anew are already 0; reused ones are cleared as
	// their rows are written.
	zeroed := int64(cap(b.LossMask)) < n && int64(cap(b.OldLogprobs)) < n && int64(cap(b.Advantages)) < n
	b.InputIDs, b.LossMask, b.OldLogprobs = grow(b.InputIDs, n), grow(b.LossMask, n), grow(b.OldLogprobs, n)
	b.Advantages, b.Positions = grow(b.Advantages, n), grow(b.Positions, n)
	if !zeroed {
		// Large clears take the processor's streaming-store path, which
		// small per-row ones do not.
		whole := []int64{0, n / 2, n}
		inParallel(whole, func(lo, hi int) int64 {
			clearTokens(b, int(whole[lo]), int(whole[hi]))
			return 0
		})
	}
	if b.Layout == Rows {
		b.RowOffsets = make([]int64, nr+1)
		for ri, t := range rd.tokens {
			b.RowOffsets[ri+1] = b.RowOffsets[ri] + t
		}
		b.ActionTokensWithoutLogprobs = inParallel(b.RowOffsets, func(lo, hi int) (missing int64) {
			start := 0
			if lo > 0 {
				start = rd.rowEnd[lo-1]
			}
			for ri := lo; ri < hi; ri++ {
				off := int(b.RowOffsets[ri])
				copy(b.Positions[off:b.RowOffsets[ri+1]], iota)
				for _, si := range rd.rowSegs[start:rd.rowEnd[ri]] {
					off = rd.write(b, si, off, rd.segs[si].owner == ri, &missing)
				}
				start = rd.rowEnd[ri]
			}
			return missing
		})
		return
	}
	ns := len(rd.segs)
	b.SegOffsets, b.SegParent, b.SegGroup = make([]int64, ns+1), make([]int64, ns), make([]int64, ns)
	b.SegNode, b.SegOwner, b.RowSegment = make([]int64, ns), make([]int64, ns), make([]int64, nr)
	for si, s := range rd.segs {
		b.SegOffsets[si+1] = b.SegOffsets[si] + int64(s.tokens)
		b.SegParent[si], b.SegGroup[si], b.SegNode[si], b.SegOwner[si] = int64(s.parent), int64(rd.groups[s.group].ID), int64(s.node), int64(s.owner)
	}
	for ri := range rd.rows {
		b.RowSegment[ri] = int64(rd.rowSegs[rd.rowEnd[ri]-1])
	}
	b.ActionTokensWithoutLogprobs = inParallel(b.SegOffsets, func(lo, hi int) (missing int64) {
		for si := lo; si < hi; si++ {
			off, end := int(b.SegOffsets[si]), int(b.SegOffsets[si+1])
			copy(b.Positions[off:end], iota[rd.segs[si].depth:])
			rd.write(b, si, off, true, &missing)
		}
		return missing
	})
}

// clearTokens zeroes the mask, logprobs and advantages of tokens [lo, hi):
// most of them stay 0 (prompt and observation tokens, prefixes a row does
// not own), so one clear and then only the trainable tokens written is
// cheaper than a clear per run of untrainable ones.
func clearTokens(b *Batch, lo, hi int) {
	clear(b.LossMask[lo:hi])
	clear(b.OldLogprobs[lo:hi])
	clear(b.Advantages[lo:hi])
}

// parallelMin is the number of tokens below which one goroutine writes
// everything: starting more costs more than it saves.
var parallelMin int64 = 1 << 18

// inParallel splits units (rows or segments, unit i being tokens
// [offsets[i], offsets[i+1])) into runs of about equal tokens, one per
// processor, and runs fn on each concurrently. Each run writes only its
// own token range, so the runs share nothing; it returns the sum of their
// results.
func inParallel(offsets []int64, fn func(lo, hi int) int64) int64 {
	units := len(offsets) - 1
	total := offsets[units]
	p := min(runtime.GOMAXPROCS(0), units, 8)
	if total < parallelMin || p <= 1 {
		return fn(0, units)
	}
	results := make([]int64, p)
	var wg sync.WaitGroup
	lo := 0
	for k := range p {
		hi := units
		if k < p-1 {
			want := total * int64(k+1) / int64(p)
			hi = lo + sort.Search(units-lo, func(i int) bool { return offsets[lo+i] >= want })
		}
		wg.Add(1)
		go func(k, lo, hi int) {
			defer wg.Done()
			results[k] = fn(lo, hi)
		}(k, lo, hi)
		lo = hi
	}
	wg.Wait()
	var sum int64
	for _, r := range results {
		sum += r
	}
	return sum
}

// write writes segment si's tokens at off and returns the offset after
// them; owned says whether its action tokens are trainable here. The mask,
// logprob and advantage arrays are already 0: only trainable tokens touch
// them.
func (rd *reader) write(b *Batch, si, off int, owned bool, missing *int64) int {
	s := rd.segs[si]
	if s.node == 0 {
		for i, t := range rd.groups[s.group].PromptTokens {
			b.InputIDs[off+i] = int32(t)
		}
		return off + s.tokens
	}
	adv := float32(0)
	if rw := rd.rows[s.owner]; owned && rw.leaf.Status != store.NodeFailed {
		adv = float32(rw.adv)
	}
	at := rd.turnAt[s.node]
	for _, t := range rd.refs[at+s.from : at+s.to] {
		end := off + len(t.ActionTokens)/4
		safetensors.Decode(b.InputIDs[off:end], t.ActionTokens)
		if owned {
			fill(b.LossMask[off:end], 1)
			if adv != 0 {
				fill(b.Advantages[off:end], adv)
			}
			if len(t.ActionLogprobs) > 0 {
				safetensors.Decode(b.OldLogprobs[off:end], t.ActionLogprobs)
			} else {
				*missing += int64(end - off)
			}
		}
		off = end
		end = off + len(t.ObservationTokens)/4
		safetensors.Decode(b.InputIDs[off:end], t.ObservationTokens)
		off = end
	}
	return off
}

// fill sets every element of s to v by doubling copies (memmove), much
// faster than an element loop on the runs of hundreds of tokens a turn has.
func fill[T any](s []T, v T) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	for n := 1; n < len(s); n *= 2 {
		copy(s[n:], s[:n])
	}
}

// grow returns s resized to n, reusing its memory when it is large enough.
func grow[T any](s []T, n int64) []T {
	if int64(cap(s)) >= n {
		return s[:n]
	}
	return make([]T, n)
}
