package store

import (
	"math"

	"github.com/patrdb/patrdb/model"
	bolt "go.etcd.io/bbolt"
)

// scalarsBucket is the run's scalars bucket, nil when the run never
// logged one (it is created by the first PutScalars).
func (r *RunTx) scalarsBucket() *bolt.Bucket { return r.b.Bucket([]byte(bScalars)) }

// scalars checks every scalars record: it decodes, matches its key, and
// keeps the rule PutScalars keeps (finite values under valid names).
func (c *checker) scalars(r *RunTx) {
	b := r.scalarsBucket()
	if b == nil {
		return
	}
	path := r.bpath(bScalars)
	_ = b.ForEach(func(k, v []byte) error {
		var s model.Scalars
		if err := decodeValue(path, k, v, &s); err != nil {
			c.fromErr(path, err)
			return nil
		}
		if len(k) != 8 || s.Step != keyU64(k, 0) || validStep(s.Step) != nil {
			c.inv(path, cloneBytes(k), "record does not match its key")
			return nil
		}
		if len(s.Values) == 0 || len(s.Values) > MaxScalarsInStep {
			c.inv(path, cloneBytes(k), "%d values: a step holds 1 to %d", len(s.Values), MaxScalarsInStep)
		}
		for name, x := range s.Values {
			if validScalarName(name) != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				c.inv(path, cloneBytes(k), "value %q = %v breaks the scalars rule", name, x)
				break
			}
		}
		return nil
	})
}
