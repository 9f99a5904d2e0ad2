package batch

import (
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/patrdb/patrdb/batch/internal/split"
	"github.com/patrdb/patrdb/batch/safetensors"
)

// fill sizes the token arrays once, clears the sparse ones (mask,
// logprobs, advantages, coefficients, turn rewards) when they are reused,
// and writes the rows (or segments) on up to GOMAXPROCS goroutines.
func (bd *builder) fill(b *Batch) {
	nr := len(bd.rows)
	b.RowLeaf, b.RowGroup = make([]int64, nr), make([]int64, nr)
	b.RowStatus, b.RowReward, b.RowAdvantage = make([]uint8, nr), make([]float64, nr), make([]float64, nr)
	b.RowPolicyMin, b.RowPolicyMax, b.RowPromptLen = make([]int64, nr), make([]int64, nr), make([]int64, nr)
	for i, rw := range bd.rows {
		g := bd.src.Groups[rw.leaf.Group]
		b.RowLeaf[i], b.RowGroup[i] = int64(rw.leaf.ID), int64(g.ID)
		b.RowStatus[i], b.RowReward[i] = StatusCode(rw.leaf.Status), rw.leaf.Reward
		b.RowAdvantage[i] = bd.cr.rowAdv[i]
		b.RowPolicyMin[i], b.RowPolicyMax[i] = int64(rw.vmin), int64(rw.vmax)
		b.RowPromptLen[i] = int64(len(g.PromptTokens))
		b.TokensMaterialised += bd.tokens[i]
	}
	for _, s := range bd.segs {
		b.TokensPacked += int64(s.tokens)
	}
	// Positions are copied from one ascending run, as long as the longest
	// row, rather than counted token by token.
	longest := int64(0)
	for _, t := range bd.tokens {
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
	// Arrays grow makes anew are already 0; reused ones are 0 where the
	// clear ahead reached and cleared here beyond it.
	zeroed := true
	for _, c := range []int{cap(b.LossMask), cap(b.OldLogprobs), cap(b.Advantages), cap(b.CoefPos), cap(b.CoefNeg), cap(b.LossWeight), cap(b.TurnRewards)} {
		zeroed = zeroed && int64(c) < n
	}
	bd.ahead.wg.Wait()
	from := min(int64(bd.ahead.n), n)
	b.InputIDs, b.LossMask, b.OldLogprobs = grow(b.InputIDs, n), grow(b.LossMask, n), grow(b.OldLogprobs, n)
	b.Advantages, b.Positions = grow(b.Advantages, n), grow(b.Positions, n)
	b.CoefPos, b.CoefNeg, b.LossWeight = grow(b.CoefPos, n), grow(b.CoefNeg, n), grow(b.LossWeight, n)
	b.PolicyVersions, b.TurnIndex, b.TurnRewards = grow(b.PolicyVersions, n), grow(b.TurnIndex, n), grow(b.TurnRewards, n)
	if !zeroed && from < n {
		// Large clears take the processor's streaming-store path, which
		// small per-row ones do not.
		whole := []int64{from, (from + n) / 2, n}
		inParallel(whole, func(lo, hi int) tally {
			clearTokens(b, int(whole[lo]), int(whole[hi]))
			return tally{}
		})
	}
	var t tally
	if b.Layout == Rows {
		b.RowOffsets = make([]int64, nr+1)
		for ri, t := range bd.tokens {
			b.RowOffsets[ri+1] = b.RowOffsets[ri] + t
		}
		t = inParallel(b.RowOffsets, func(lo, hi int) (t tally) {
			var f creditFill
			for ri := lo; ri < hi; ri++ {
				off := int(b.RowOffsets[ri])
				copy(b.Positions[off:b.RowOffsets[ri+1]], iota)
				for _, si := range bd.rowSegments(ri) {
					if o := bd.segs[si].owner; o >= lo && o < ri {
						off = bd.copyShared(b, si, off, ri, &f)
					} else {
						off = bd.write(b, si, off, ri, &t, &f)
					}
				}
			}
			return t
		})
	} else {
		ns := len(bd.segs)
		b.SegOffsets, b.SegParent, b.SegGroup = make([]int64, ns+1), make([]int64, ns), make([]int64, ns)
		b.SegNode, b.SegOwner, b.RowSegment = make([]int64, ns), make([]int64, ns), make([]int64, nr)
		for si, s := range bd.segs {
			b.SegOffsets[si+1] = b.SegOffsets[si] + int64(s.tokens)
			b.SegParent[si], b.SegGroup[si], b.SegNode[si], b.SegOwner[si] = int64(s.parent), int64(bd.src.Groups[s.group].ID), int64(s.node), int64(s.owner)
		}
		for ri := range bd.rows {
			b.RowSegment[ri] = int64(bd.rowSegs[bd.rowEnd[ri]-1])
		}
		t = inParallel(b.SegOffsets, func(lo, hi int) (t tally) {
			var f creditFill
			for si := lo; si < hi; si++ {
				off, end := int(b.SegOffsets[si]), int(b.SegOffsets[si+1])
				copy(b.Positions[off:end], iota[bd.segs[si].depth:])
				bd.write(b, si, off, -1, &t, &f)
			}
			return t
		})
	}
	b.ActionTokensWithoutLogprobs, b.TurnRewardsDropped = t.missing, t.dropped
}

// tally counts, each turn once whatever the layout, the trained tokens
// written without logprobs and the turn rewards with no action token to
// carry them.
type tally struct{ missing, dropped int64 }

// aheadClear zeroes, on a goroutine of its own, the sparse arrays of a
// reused batch over their length while Assemble's source is read: the
// clear wants memory bandwidth, the reading a processor, so the two
// overlap instead of adding up. Tokens [0, n) are 0 once wg is done.
type aheadClear struct {
	wg sync.WaitGroup
	n  int
}

func clearAhead(b *Batch) *aheadClear {
	sparse := Batch{LossMask: b.LossMask, OldLogprobs: b.OldLogprobs, Advantages: b.Advantages,
		CoefPos: b.CoefPos, CoefNeg: b.CoefNeg, LossWeight: b.LossWeight, TurnRewards: b.TurnRewards}
	a := &aheadClear{n: min(len(sparse.LossMask), len(sparse.OldLogprobs), len(sparse.Advantages),
		len(sparse.CoefPos), len(sparse.CoefNeg), len(sparse.LossWeight), len(sparse.TurnRewards))}
	if a.n > 0 {
		n := a.n
		a.wg.Go(func() { clearTokens(&sparse, 0, n) })
	}
	return a
}

// clearTokens zeroes the sparse arrays of tokens [lo, hi): most of their
// values stay 0 (prompt and observation tokens, prefixes a row does not
// train, all but a turn's last token), so one clear and then only the
// trained tokens and turn ends written is cheaper than a clear per run of
// untrained ones.
func clearTokens(b *Batch, lo, hi int) {
	repeatInto(b.LossMask[lo:hi], zeroBytes())
	for _, a := range [][]float32{b.OldLogprobs, b.Advantages, b.CoefPos, b.CoefNeg, b.LossWeight, b.TurnRewards} {
		repeatInto(a[lo:hi], zeroFloats())
	}
}

// repeatInto fills dst with run, over and over, one copy a run's length.
// It zeroes an array with a zero run of 1 MiB or more: Go's copy of 1 MiB
// or more (amd64) uses non-temporal stores, which write memory without
// first reading it, while clear below 32 MiB does not; on the arrays of a
// batch of hundreds of MB (each under 32 MiB per goroutine) that makes
// the clear several times faster.
func repeatInto[T any](dst, run []T) {
	for len(run) > 0 && len(dst) > 0 {
		dst = dst[copy(dst, run):]
	}
}

// The zero runs clearTokens copies from, 1 MiB each, made on first use.
var (
	zeroBytes  = sync.OnceValue(func() []uint8 { return make([]uint8, 1<<20) })
	zeroFloats = sync.OnceValue(func() []float32 { return make([]float32, 1<<18) })
)

// inParallel splits units (rows or segments, unit i being tokens
// [offsets[i], offsets[i+1])) into runs of about equal tokens, one per
// processor, and runs fn on each concurrently. Each run writes only its
// own token range, so the runs share nothing; it returns the sum of their
// tallies.
func inParallel(offsets []int64, fn func(lo, hi int) tally) tally {
	units := len(offsets) - 1
	total := offsets[units] - offsets[0]
	p := min(runtime.GOMAXPROCS(0), units, 8)
	if total < split.Min || p <= 1 {
		return fn(0, units)
	}
	results := make([]tally, p)
	var wg sync.WaitGroup
	lo := 0
	for k := range p {
		hi := units
		if k < p-1 {
			want := offsets[0] + total*int64(k+1)/int64(p)
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
	var sum tally
	for _, r := range results {
		sum.missing += r.missing
		sum.dropped += r.dropped
	}
	return sum
}

// write writes segment si's tokens at off and returns the offset after
// them: into row ri of the rows layout, or into the tree (ri = -1). The
// sparse arrays are already 0: only trained tokens and turn ends touch
// them; the others are written whole.
func (bd *builder) write(b *Batch, si, off, ri int, t *tally, f *creditFill) int {
	s := bd.segs[si]
	if s.node == 0 {
		for i, id := range bd.src.Groups[s.group].PromptTokens {
			b.InputIDs[off+i] = int32(id)
		}
		end := off + s.tokens
		clear(b.PolicyVersions[off:end])
		fill(b.TurnIndex[off:end], -1)
		return end
	}
	trained, c := bd.segCredit(ri, si)
	once := ri < 0 || s.owner == ri // this is where the tallies count the segment
	for k, v := range bd.turns(s.node, s.from, s.to) {
		start, end := off, off+len(v.ActionTokens)/4
		safetensors.Decode(b.InputIDs[off:end], v.ActionTokens)
		if trained {
			f.mask(b, off, end)
			f.put(b, off, end, c)
			if len(v.ActionLogprobs) > 0 {
				safetensors.Decode(b.OldLogprobs[off:end], v.ActionLogprobs)
			} else if once {
				t.missing += int64(end - off)
			}
		}
		if end > off {
			b.TurnRewards[end-1] = float32(v.Reward)
		} else if once && v.Reward != 0 {
			t.dropped++
		}
		off = end
		end = off + len(v.ObservationTokens)/4
		safetensors.Decode(b.InputIDs[off:end], v.ObservationTokens)
		fill(b.PolicyVersions[start:end], int64(v.PolicyVersion))
		fill(b.TurnIndex[start:end], int32(s.turn0+k))
		off = end
	}
	return off
}

// segCredit is whether row ri trains segment si's action tokens and what
// it puts on them; ri < 0 is the tree layout's segment.
func (bd *builder) segCredit(ri, si int) (bool, segCredit) {
	if ri < 0 {
		return true, bd.cr.tree[si]
	}
	if !bd.trains(ri, si) {
		return false, segCredit{}
	}
	w := bd.cr.rowW[ri]
	c := segCredit{adv: bd.advOf(ri, si), weight: float32(w)}
	c.pos, c.neg = Coefs(w, c.adv)
	return true, c
}

// creditFill writes the runs of a goroutine's trained tokens: the mask's
// 1s and the credit arrays' values, each one copy from a run of them made
// when the values change (once a row under Repeat), instead of a doubling
// fill every run.
type creditFill struct {
	c    segCredit
	runs [4][]float32 // each credit array's value of c, repeated
	ones []uint8
}

// creditRun is the length of creditFill's runs: most action runs in one
// copy, all in L1.
const creditRun = 512

// put puts c on tokens [off, end) of the credit arrays, already 0.
func (f *creditFill) put(b *Batch, off, end int, c segCredit) {
	f.ready()
	if !sameBits(c, f.c) {
		for k, p := range creditArrays(b, c) {
			fill(f.runs[k], p.v)
		}
		f.c = c
	}
	for k, p := range creditArrays(b, c) {
		if p.v != 0 {
			repeatInto(p.dst[off:end], f.runs[k])
		}
	}
}

// mask puts 1 on tokens [off, end) of the loss mask.
func (f *creditFill) mask(b *Batch, off, end int) {
	f.ready()
	repeatInto(b.LossMask[off:end], f.ones)
}

// ready makes the runs on first use: 1s, and the zero credit's 0s.
func (f *creditFill) ready() {
	if f.ones != nil {
		return
	}
	f.ones = make([]uint8, creditRun)
	fill(f.ones, 1)
	for k := range f.runs {
		f.runs[k] = make([]float32, creditRun)
	}
}

// creditArrays pairs each credit array with the value c puts on it.
func creditArrays(b *Batch, c segCredit) [4]struct {
	dst []float32
	v   float32
} {
	return [4]struct {
		dst []float32
		v   float32
	}{{b.Advantages, c.adv}, {b.CoefPos, c.pos}, {b.CoefNeg, c.neg}, {b.LossWeight, c.weight}}
}

// copyShared writes segment si into row ri at off from its owner row,
// written earlier by the same goroutine: every array but the credit ones
// is the same in each row that contains the segment, so a shared prefix is
// decoded once, then its dense arrays are moved whole, one copy an array.
// The sparse arrays keep write's rule (only trained tokens and turn ends
// are written, over the clear): their action runs are copied from the
// owner, the credit ones too when ri puts the same bits on them as the
// owner (rows of equal advantage under one weight, as GRPO's are), and
// filled otherwise.
func (bd *builder) copyShared(b *Batch, si, off, ri int, f *creditFill) int {
	s := bd.segs[si]
	src, end := int(b.RowOffsets[s.owner])+s.depth, off+s.tokens
	from, d := src+s.tokens, src-off // d: from a token of ri to the owner's same token
	copy(b.InputIDs[off:end], b.InputIDs[src:from])
	copy(b.PolicyVersions[off:end], b.PolicyVersions[src:from])
	copy(b.TurnIndex[off:end], b.TurnIndex[src:from])
	if s.node == 0 {
		return end // a prompt has no turn ends and trains nothing
	}
	trained, c := bd.segCredit(ri, si)
	_, oc := bd.segCredit(s.owner, si)
	same := sameBits(c, oc)
	for _, v := range bd.turns(s.node, s.from, s.to) {
		n := len(v.ActionTokens) / 4
		if n > 0 {
			b.TurnRewards[off+n-1] = float32(v.Reward)
		}
		if trained && n > 0 {
			z := off + d
			copy(b.LossMask[off:off+n], b.LossMask[z:z+n])
			if len(v.ActionLogprobs) > 0 {
				copy(b.OldLogprobs[off:off+n], b.OldLogprobs[z:z+n])
			}
			if same {
				for _, p := range creditArrays(b, c) {
					if p.v != 0 {
						copy(p.dst[off:off+n], p.dst[z:z+n])
					}
				}
			} else {
				f.put(b, off, off+n, c)
			}
		}
		off += n + len(v.ObservationTokens)/4
	}
	return end
}

func sameBits(a, b segCredit) bool {
	return math.Float32bits(a.adv) == math.Float32bits(b.adv) && math.Float32bits(a.pos) == math.Float32bits(b.pos) &&
		math.Float32bits(a.neg) == math.Float32bits(b.neg) && math.Float32bits(a.weight) == math.Float32bits(b.weight)
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
