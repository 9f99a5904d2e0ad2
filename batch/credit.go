package batch

import "github.com/patrdb/patrdb/model"

// credits are the credit rule and the normalisation applied to the rows of
// one batch: who trains each segment's action tokens, with which
// advantage and weight, and what the tree layout carries per segment.
// The formulas are the package documentation's ("The loss").
type credits struct {
	rule   Credit
	norm   Norm
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
func (bd *builder) trains(ri, si int) bool {
	return bd.cr.rule == Repeat || bd.segs[si].owner == ri
}

// advOf is the advantage row ri trains segment si's action tokens with.
func (bd *builder) advOf(ri, si int) float32 {
	if bd.cr.rule == Mean {
		return bd.cr.mean[si]
	}
	return float32(bd.cr.rowAdv[ri])
}

// rowSegments are row ri's segments, its prompt first.
func (bd *builder) rowSegments(ri int) []int {
	start := 0
	if ri > 0 {
		start = bd.rowEnd[ri-1]
	}
	return bd.rowSegs[start:bd.rowEnd[ri]]
}

// credit computes the rule's figures once the rows and segments are
// planned: the means, each row's trained tokens and weight, and for the
// tree layout each segment's advantage and coefficients, summed over the
// rows that train it in row order.
func (bd *builder) credit() {
	c := &bd.cr
	c.rule, c.norm = bd.opts.Credit, bd.opts.Norm
	nr, ns := len(bd.rows), len(bd.segs)
	c.rowAdv = make([]float64, nr)
	for i, rw := range bd.rows {
		if rw.leaf.Status != model.NodeFailed {
			c.rowAdv[i] = rw.leaf.Advantage
		}
	}
	count, sum := make([]int, ns), make([]float64, ns)
	trained := make([]int64, nr)
	for ri := range nr {
		for _, si := range bd.rowSegments(ri) {
			count[si]++
			sum[si] += c.rowAdv[ri]
			if bd.trains(ri, si) {
				trained[ri] += int64(bd.segs[si].actions)
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
		c.rowW[ri] = RowWeight(c.norm, c.tokens, c.rows, n)
	}
	if bd.opts.Layout != Tree {
		return
	}
	pos, neg, w := make([]float64, ns), make([]float64, ns), make([]float64, ns)
	for ri := range nr {
		for _, si := range bd.rowSegments(ri) {
			if !bd.trains(ri, si) {
				continue
			}
			p, n := SplitAdvantage(bd.advOf(ri, si))
			pos[si] += c.rowW[ri] * p
			neg[si] += c.rowW[ri] * n
			w[si] += c.rowW[ri]
		}
	}
	c.tree = make([]segCredit, ns)
	for si, s := range bd.segs {
		adv := c.mean[si]
		if c.rule == Owner {
			adv = float32(c.rowAdv[s.owner])
		}
		c.tree[si] = segCredit{adv: adv, pos: float32(pos[si]), neg: float32(neg[si]), weight: float32(w[si])}
	}
}
