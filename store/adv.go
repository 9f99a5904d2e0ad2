package store

import "github.com/patrdb/patrdb/model"

// PutAdvantage writes the advantage record of one leaf. The leaf must be a
// leaf node (completed, pruned or truncated) of that group; writing the same
// leaf again overwrites, so re-closing a group after a crash is safe.
func (r *RunTx) PutAdvantage(a model.Advantage) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	return r.tx.fail(r.putAdvantage(&a))
}

func (r *RunTx) putAdvantage(a *model.Advantage) error {
	for _, x := range []float64{a.Outcome, a.RubricScore, a.Lambda, a.Total, a.Mean, a.Std, a.Advantage} {
		if !finite(x) {
			return invalidf("advantage of leaf %d has a non-finite value", a.Leaf)
		}
	}
	if a.Std < 0 {
		return invalidf("advantage of leaf %d has negative std %v", a.Leaf, a.Std)
	}
	if _, err := r.groupRef(a.Step, a.Group); err != nil {
		return err
	}
	n, err := r.nodeRef(a.Leaf)
	if err != nil {
		return err
	}
	if n.Group != a.Group || n.Step != a.Step {
		return invalidf("node %d is not in group %d of step %d", a.Leaf, a.Group, a.Step)
	}
	if !n.Status.Leaf() {
		return invalidf("node %d is %s, not a leaf", a.Leaf, n.Status)
	}
	b, err := r.bucket(bAdv)
	if err != nil {
		return err
	}
	val := r.tx.value(advantageSize(a), func(b []byte) []byte { return appendAdvantageMsgp(b, a) })
	d, err := r.advDelta(a)
	if err != nil {
		return err
	}
	if err := r.tally(&d); err != nil {
		return err
	}
	if err := r.tx.put(b, r.tx.putKey3(a.Step, a.Group, a.Leaf), val); err != nil {
		return err
	}
	return r.appendEvent(model.Event{Kind: model.EvAdvantage, Step: a.Step, Group: a.Group, Node: a.Leaf}, val)
}

// Advantages returns the records of a step (0: every step) and group (0:
// every group of the step) in key order.
func (r *RunTx) Advantages(step, group uint64) ([]model.Advantage, error) {
	if r.checking() && step != 0 {
		return r.chk.Advantages(step, group)
	}
	if r.checking() { // every step's advantages: a read of the whole run
		p, err := r.chk.Sound()
		if err != nil {
			return nil, err
		}
		return p.Advantages(step, group)
	}
	b, err := r.bucket(bAdv)
	if err != nil {
		return nil, err
	}
	prefix := advPrefix(step, group)
	var out []model.Advantage
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil; k, v = c.Next() {
		if len(k) != 24 {
			return nil, &CorruptError{Bucket: r.bpath(bAdv), Key: cloneBytes(k), Reason: "advantage key is not 24 bytes"}
		}
		if (step != 0 && keyU64(k, 0) != step) || (group != 0 && keyU64(k, 1) != group) {
			break
		}
		var a model.Advantage
		if err := decodeValue(r.bpath(bAdv), k, v, &a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// LastAdvantage returns the advantage record with the highest key, one of
// the newest step that has any; ErrNotFound when the run has none.
func (r *RunTx) LastAdvantage() (model.Advantage, error) {
	if r.checking() {
		return r.chk.LastAdvantage()
	}
	var a model.Advantage
	b, err := r.bucket(bAdv)
	if err != nil {
		return a, err
	}
	k, v := b.Cursor().Last()
	if k == nil {
		return a, notFoundf("advantages of run %q", r.id)
	}
	err = decodeValue(r.bpath(bAdv), k, v, &a)
	return a, err
}

// advPrefix is the key prefix of the advantage records of a step (0:
// every step) and group (0: every group of the step).
func advPrefix(step, group uint64) []byte {
	switch {
	case step != 0 && group != 0:
		return u64key2(step, group)
	case step != 0:
		return u64key(step)
	}
	return nil
}
