package batch

import (
	"runtime"
	"sort"
	"sync"

	"github.com/patrdb/patrdb/batch/safetensors"
	"github.com/patrdb/patrdb/store"
)

// fill sizes the token arrays once, clears the mask, logprob and
// advantage arrays when they are reused, and writes the rows (or segments)
// on up to GOMAXPROCS goroutines.
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
