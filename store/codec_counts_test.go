package store

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// The counters are written by hand and read by msgpack/v5: every record
// must be the bytes msgpack/v5 writes for it, deltas' negative figures and
// the widest integers included.
func TestCountsEncodeMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	edges := []int64{0, 1, -1, 127, 128, -33, math.MaxUint16 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	figure := func() int64 {
		if rng.IntN(3) == 0 {
			return edges[rng.IntN(len(edges))]
		}
		return randInt(rng)
	}
	tx := &Tx{}
	for i := range 300 {
		c := counts{Groups: figure(), OpenGroups: figure(), ZeroVariance: figure(),
			Turns: figure(), Materialised: figure(), Rewarded: figure(), RewardSum: rng.NormFloat64() * 1e6}
		for j := range c.ByStatus {
			c.ByStatus[j] = figure()
		}
		if i == 0 {
			c = counts{}
		}
		want, err := encodeValue(&c)
		if err != nil {
			t.Fatal(err)
		}
		if got := tx.countsValue(&c); !bytes.Equal(got, want) {
			t.Fatalf("%+v:\nwritten  % x\nmsgpack  % x", c, got, want)
		}
		var back counts
		if err := decodeValue("counts", u64key(0), tx.countsValue(&c), &back); err != nil || back != c {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, back, c)
		}
	}
}
