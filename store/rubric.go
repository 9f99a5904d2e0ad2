package store

import "github.com/patrdb/patrdb/model"

// PutRubric adds a rubric. A zero ID takes the next id of the run's rubric
// sequence; a non-zero ID must not exist yet. The pool must be valid, and a
// rubric put straight into the merged pool must name the public or retired
// rubric that absorbed it (MergedInto), as Check requires.
func (r *RunTx) PutRubric(rb model.Rubric) (model.Rubric, error) {
	if err := r.tx.check(true); err != nil {
		return model.Rubric{}, err
	}
	b, err := r.bucket(bRubrics)
	if err != nil {
		return model.Rubric{}, r.tx.fail(err)
	}
	if !rb.Pool.Valid() {
		return model.Rubric{}, r.tx.fail(invalidf("rubric pool %q", rb.Pool))
	}
	if err := validRubricNumbers(&rb); err != nil {
		return model.Rubric{}, r.tx.fail(err)
	}
	if rb.Pool == model.PoolMerged {
		into, err := r.Rubric(rb.MergedInto)
		if err != nil {
			return model.Rubric{}, r.tx.fail(err)
		}
		if into.Pool != model.PoolPublic && into.Pool != model.PoolRetired {
			return model.Rubric{}, r.tx.fail(invalidf("rubric merges into %d, which is %s", into.ID, into.Pool))
		}
	}
	if rb.ID == 0 {
		if rb.ID, err = b.NextSequence(); err != nil {
			return model.Rubric{}, r.tx.fail(err)
		}
	} else {
		if b.Get(u64key(rb.ID)) != nil {
			return model.Rubric{}, r.tx.fail(existsf("rubric %d", rb.ID))
		}
		if rb.ID > b.Sequence() {
			if err := b.SetSequence(rb.ID); err != nil {
				return model.Rubric{}, r.tx.fail(err)
			}
		}
	}
	return rb, r.tx.fail(r.putRubric(&rb, model.EvRubricPut, rb.CreatedStep))
}

func validRubricNumbers(rb *model.Rubric) error {
	u := rb.Usage
	for _, x := range []float64{rb.Variance, rb.Rho, u.LastVariance, u.N, u.SumX, u.SumY, u.SumXY, u.SumXX, u.SumYY} {
		if !finite(x) {
			return invalidf("rubric %d has a non-finite statistic", rb.ID)
		}
	}
	if rb.Support < 0 || u.Activations < 0 || u.PairsJudged < 0 || u.LowVarStreak < 0 || u.GroupsUnlocked < 0 || u.N < 0 {
		return invalidf("rubric %d has a negative count", rb.ID)
	}
	return nil
}

// putRubric writes rb and logs kind, stamped with the step the change
// happened in (not the rubric's creation step), so a reader of the log sees
// a retirement in the step it retired.
func (r *RunTx) putRubric(rb *model.Rubric, kind model.EventKind, step uint64) error {
	b, err := r.bucket(bRubrics)
	if err != nil {
		return err
	}
	val, err := encodeValue(rb)
	if err != nil {
		return err
	}
	if err := b.Put(u64key(rb.ID), val); err != nil {
		return err
	}
	return r.appendEvent(model.Event{Kind: kind, Step: step, Rubric: rb.ID}, val)
}

// UpdateRubric rewrites a rubric's text, support and statistics. Its pool
// does not change here; moves go through MoveRubric so they obey the
// lifecycle.
func (r *RunTx) UpdateRubric(rb model.Rubric) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	old, err := r.Rubric(rb.ID)
	if err != nil {
		return r.tx.fail(err)
	}
	if old.Pool != rb.Pool {
		return r.tx.fail(invalidf("rubric %d: pool changes go through MoveRubric", rb.ID))
	}
	if err := validRubricNumbers(&rb); err != nil {
		return r.tx.fail(err)
	}
	step := rb.CreatedStep
	if la := rb.Usage.LastActivation; la > 0 && uint64(la) > step {
		step = uint64(la)
	}
	return r.tx.fail(r.putRubric(&rb, model.EvRubricUpdate, step))
}

// RubricMove describes a pool change.
type RubricMove struct {
	To         model.RubricPool
	Step       uint64
	Reason     string // why it retired
	MergedInto uint64 // the public rubric that absorbed a merged draft
}

// MoveRubric moves a rubric between pools: candidate → public, merged or
// retired; public → retired. Retired and merged are final. Moving to merged
// needs an existing public MergedInto.
func (r *RunTx) MoveRubric(id uint64, m RubricMove) (model.Rubric, error) {
	if err := r.tx.check(true); err != nil {
		return model.Rubric{}, err
	}
	rb, err := r.Rubric(id)
	if err != nil {
		return model.Rubric{}, r.tx.fail(err)
	}
	if !m.To.Valid() || !rb.Pool.CanMove(m.To) {
		return model.Rubric{}, r.tx.fail(invalidf("rubric %d cannot move from %s to %q", id, rb.Pool, m.To))
	}
	switch m.To {
	case model.PoolMerged:
		into, err := r.Rubric(m.MergedInto)
		if err != nil {
			return model.Rubric{}, r.tx.fail(err)
		}
		if into.Pool != model.PoolPublic {
			return model.Rubric{}, r.tx.fail(invalidf("rubric %d merges into %d, which is %s", id, into.ID, into.Pool))
		}
		rb.MergedInto = into.ID
	case model.PoolRetired:
		rb.RetireStep, rb.RetireReason = m.Step, m.Reason
	}
	rb.Pool = m.To
	step := m.Step
	if step == 0 {
		step = rb.CreatedStep
	}
	return rb, r.tx.fail(r.putRubric(&rb, model.EvRubricMove, step))
}

// Rubric returns one rubric.
func (r *RunTx) Rubric(id uint64) (model.Rubric, error) {
	if r.checking() {
		return r.chk.Rubric(id)
	}
	var rb model.Rubric
	b, err := r.bucket(bRubrics)
	if err != nil {
		return rb, err
	}
	k := u64key(id)
	raw := b.Get(k)
	if raw == nil {
		return rb, notFoundf("rubric %d of run %q", id, r.id)
	}
	err = decodeValue(r.bpath(bRubrics), k, raw, &rb)
	return rb, err
}

// Rubrics returns the rubrics of a pool ("" for all) in id order.
func (r *RunTx) Rubrics(pool model.RubricPool) ([]model.Rubric, error) {
	if r.checking() {
		return r.chk.Rubrics(pool)
	}
	b, err := r.bucket(bRubrics)
	if err != nil {
		return nil, err
	}
	var out []model.Rubric
	err = b.ForEach(func(k, v []byte) error {
		var rb model.Rubric
		if err := decodeValue(r.bpath(bRubrics), k, v, &rb); err != nil {
			return err
		}
		if pool == "" || rb.Pool == pool {
			out = append(out, rb)
		}
		return nil
	})
	return out, err
}
