package batchdb

import "github.com/patrdb/patrdb/batch"

import "github.com/patrdb/patrdb/model"

// credit is the credit rule and the normalisation applied to the rows of
// one batch: who trains each segment's action tokens, with which
// advantage and weight, and what the tree layout carries per segment.
// The formulas are the package documentation's ("The loss").
type credit struct {
	rule   batch.Credit
	norm   batch.Norm
	rowAdv []float64 // A_r: the leaf's advantage, 0 for a failed row
	rowW   []float64 // w_r
	mean   []float32 // per segment: the mean A_r over the rows that contain it
	tree   []segCredit
	tokens int64 // N: tokens trained over all rows (each row's count)
	rows   int64 // R: rows that train at least one token
}

// segCredit is what the tree layout puts on every action token of a
// segment.
type segCredit struct {
	adv, pos, neg, weight float32
}

// trains reports whether row ri trains the action tokens of segment si
// (which it contains).
func (rd *reader) trains(ri, si int) bool {
	return rd.cr.rule == batch.Repeat || rd.segs[si].owner == ri
}

// advOf is the advantage row ri trains segment si's action tokens with.
func (rd *reader) advOf(ri, si int) float32 {
	if rd.cr.rule == batch.Mean {
		return rd.cr.mean[si]
	}
	return float32(rd.cr.rowAdv[ri])
}

// rowSegments are row ri's segments, its prompt first.
func (rd *reader) rowSegments(ri int) []int {
	start := 0
	if ri > 0 {
		start = rd.rowEnd[ri-1]
	}
	return rd.rowSegs[start:rd.rowEnd[ri]]
}

// credit computes the rule's figures once the rows and segments are
// planned: the means, each row's trained tokens and weight, and for the
// tree layout each segment's advantage and coefficients, summed over the
// rows that train it in row order.
func (rd *reader) credit() {
	c := &rd.cr
	c.rule, c.norm = rd.opts.Credit, rd.opts.Norm
	nr, ns := len(rd.rows), len(rd.segs)
	c.rowAdv = make([]float64, nr)
	for i, rw := range rd.rows {
		if rw.leaf.Status != model.NodeFailed {
			c.rowAdv[i] = rw.adv
		}
	}
	count, sum := make([]int, ns), make([]float64, ns)
	trained := make([]int64, nr)
	for ri := range nr {
		for _, si := range rd.rowSegments(ri) {
			count[si]++
			sum[si] += c.rowAdv[ri]
			if rd.trains(ri, si) {
				trained[ri] += int64(rd.segs[si].actions)
			}
		}
	}
	c.mean = make([]float32, ns)
	for si := range ns {
		if count[si] > 0 {
			c.mean[si] = float32(sum[si] / float64(count[si]))
		}
	}
	for _, n := range trained {
		c.tokens += n
		if n > 0 {
			c.rows++
		}
	}
	c.rowW = make([]float64, nr)
	for ri, n := range trained {
		c.rowW[ri] = batch.RowWeight(c.norm, c.tokens, c.rows, n)
	}
	if rd.opts.Layout != batch.Tree {
		return
	}
	pos, neg, w := make([]float64, ns), make([]float64, ns), make([]float64, ns)
	for ri := range nr {
		for _, si := range rd.rowSegments(ri) {
			if !rd.trains(ri, si) {
				continue
			}
			p, n := batch.SplitAdvantage(rd.advOf(ri, si))
			pos[si] += c.rowW[ri] * p
			neg[si] += c.rowW[ri] * n
			w[si] += c.rowW[ri]
		}
	}
	c.tree = make([]segCredit, ns)
	for si, s := range rd.segs {
		adv := c.mean[si]
		if c.rule == batch.Owner {
			adv = float32(c.rowAdv[s.owner])
		}
		c.tree[si] = segCredit{adv: adv, pos: float32(pos[si]), neg: float32(neg[si]), weight: float32(w[si])}
	}
}
