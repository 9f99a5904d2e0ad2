package store

import (
	"github.com/patrdb/patrdb/model"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/vmihailenco/msgpack/v5"
)

// A trainer's own figures of a step — loss, KL, entropy, grad norm,
// learning rate — kept beside the rollouts they came from, so the viewer
// and the lake show both and no second tool is needed for them. One
// record per step in the run's scalars bucket (format 5), written like
// every record: validated first, with its event in the same transaction.
//
// The bucket is created by the first write, so a run that never logged a
// figure has none, and reads take its absence as no records. Scalars stay
// when DropSteps drops their step, as the counters do: they are a few
// bytes a step, and the curves they draw describe the whole run.

// bScalars is the run's sub-bucket of Scalars records, keyed by step.
const bScalars = "scalars"

// The bounds of a step's scalars: generous for any trainer's figures,
// small enough that a record stays a small value.
const (
	MaxScalarName    = 128  // bytes of one name
	MaxScalarsPerPut = 256  // names in one PutScalars
	MaxScalarsInStep = 1024 // names a step's record holds
)

// validScalarName is the rule for a figure's name: 1 to MaxScalarName
// bytes of valid UTF-8 without control characters or surrounding space
// ("loss", "train/kl", "lr").
func validScalarName(name string) error {
	switch {
	case name == "":
		return invalidf("scalar name is empty")
	case len(name) > MaxScalarName:
		return invalidf("scalar name %.32q...: %d bytes, at most %d", name, len(name), MaxScalarName)
	case !validUTF8(name):
		return invalidf("scalar name %q is not valid UTF-8", name)
	case strings.TrimSpace(name) != name:
		return invalidf("scalar name %q has surrounding white space", name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return invalidf("scalar name %q has a control character", name)
	}
	return nil
}

// validScalars checks the values of one PutScalars for step.
func validScalars(step uint64, values map[string]float64) error {
	if len(values) == 0 {
		return invalidf("scalars for step %d: none given", step)
	}
	if len(values) > MaxScalarsPerPut {
		return invalidf("scalars for step %d: %d in one write, at most %d", step, len(values), MaxScalarsPerPut)
	}
	for _, name := range slices.Sorted(maps.Keys(values)) { // the same error for the same input
		if err := validScalarName(name); err != nil {
			return err
		}
		if v := values[name]; math.IsNaN(v) || math.IsInf(v, 0) {
			return invalidf("scalars for step %d: %q is %v, values must be finite", step, name, v)
		}
	}
	return nil
}

// PutScalars records values for step: names the step had keep their
// other values, names given replace theirs (a trainer logs at several
// points of a step, as it would to any metrics tool). The step must be
// one the run has not dropped; names follow validScalarName, values are
// finite, at most MaxScalarsPerPut in one write and MaxScalarsInStep in a
// step. Bad input is ErrInvalid and writes nothing.
func (r *RunTx) PutScalars(step uint64, values map[string]float64) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	if err := validStep(step); err != nil {
		return r.tx.fail(err)
	}
	if err := validScalars(step, values); err != nil {
		return r.tx.fail(err)
	}
	run, err := r.Info()
	if err != nil {
		return r.tx.fail(err)
	}
	if step <= run.DroppedStep {
		return r.tx.fail(invalidf("scalars for step %d: run %q dropped its steps through %d", step, r.id, run.DroppedStep))
	}
	b, err := r.b.CreateBucketIfNotExists([]byte(bScalars))
	if err != nil {
		return r.tx.fail(err)
	}
	b.FillPercent = 1 // steps grow at the end, mostly
	k := u64key(step)
	rec := model.Scalars{Step: step, Values: make(map[string]float64, len(values))}
	if raw := b.Get(k); raw != nil {
		if err := decodeValue(r.bpath(bScalars), k, raw, &rec); err != nil {
			return r.tx.fail(err)
		}
		if rec.Values == nil {
			rec.Values = make(map[string]float64, len(values))
		}
	}
	for name, v := range values {
		rec.Values[name] = v
	}
	if len(rec.Values) > MaxScalarsInStep {
		return r.tx.fail(invalidf("scalars for step %d: %d names, at most %d in a step", step, len(rec.Values), MaxScalarsInStep))
	}
	rec.UpdatedAt = r.tx.db.opts.now().UnixNano()
	val, err := encodeValue(&rec)
	if err != nil {
		return r.tx.fail(err)
	}
	if err := b.Put(k, val); err != nil {
		return r.tx.fail(err)
	}
	return r.tx.fail(r.appendEvent(model.Event{Kind: model.EvScalars, Step: step}, val))
}

// ScalarsAt returns the scalars of step, or ErrNotFound when it has none.
func (r *RunTx) ScalarsAt(step uint64) (model.Scalars, error) {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return model.Scalars{}, err
		}
		return p.ScalarsAt(step)
	}
	var s model.Scalars
	if err := r.tx.check(false); err != nil {
		return s, err
	}
	b := r.b.Bucket([]byte(bScalars))
	var raw []byte
	k := u64key(step)
	if b != nil {
		raw = b.Get(k)
	}
	if raw == nil {
		return s, notFoundf("scalars of step %d of run %q", step, r.id)
	}
	err := decodeValue(r.bpath(bScalars), k, raw, &s)
	return s, err
}

// ForEachScalars calls fn with the scalars of every step from from on, in
// step order (none when the run never logged one). fn's error stops the
// walk and is returned.
func (r *RunTx) ForEachScalars(from uint64, fn func(model.Scalars) error) error {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return err
		}
		return p.ForEachScalars(from, fn)
	}
	if err := r.tx.check(false); err != nil {
		return err
	}
	b := r.b.Bucket([]byte(bScalars))
	if b == nil {
		return nil
	}
	path := r.bpath(bScalars)
	c := b.Cursor()
	for k, v := c.Seek(u64key(from)); k != nil; k, v = c.Next() {
		var s model.Scalars
		if err := decodeValue(path, k, v, &s); err != nil {
			return err
		}
		if len(k) != 8 || s.Step != keyU64(k, 0) {
			return &CorruptError{Bucket: path, Key: cloneBytes(k), Reason: "scalars record does not match its key"}
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// msgpackEncode writes the record as the array [step, values, updated_at]
// with the values' names in order: the same record must encode to the same
// bytes (the log cross-check and the crash tests compare them), and
// msgpack's map encoder keeps Go's random order for this map type.
func msgpackEncodeScalars(enc *msgpack.Encoder, s *model.Scalars) error {
	if err := enc.EncodeArrayLen(3); err != nil {
		return err
	}
	if err := enc.EncodeUint(s.Step); err != nil {
		return err
	}
	if err := enc.EncodeMapLen(len(s.Values)); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(s.Values)) {
		if err := enc.EncodeString(name); err != nil {
			return err
		}
		if err := enc.EncodeFloat64(s.Values[name]); err != nil {
			return err
		}
	}
	return enc.EncodeInt(s.UpdatedAt)
}

// msgpackDecode reads what msgpackEncode writes; fields a later format
// appends are skipped, as for every record.
func msgpackDecodeScalars(dec *msgpack.Decoder, s *model.Scalars) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	*s = model.Scalars{}
	for i := range max(n, 0) {
		switch i {
		case 0:
			s.Step, err = dec.DecodeUint64()
		case 1:
			var m int
			if m, err = dec.DecodeMapLen(); err != nil || m < 0 {
				break
			}
			s.Values = make(map[string]float64, min(m, MaxScalarsInStep))
			for range m {
				var name string
				var v float64
				if name, err = dec.DecodeString(); err != nil {
					break
				}
				if v, err = dec.DecodeFloat64(); err != nil {
					break
				}
				s.Values[name] = v
			}
		case 2:
			s.UpdatedAt, err = dec.DecodeInt64()
		default:
			err = dec.Skip()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
