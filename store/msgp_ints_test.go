package store

import (
	"bytes"
	"math"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// The hand-written encoders write each integer in msgpack/v5's shortest
// form, so records stay byte-identical to the reflection encoder's: at
// every width's edges, negative and positive.
func TestIntegersMatchMsgpackAtEveryWidth(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, math.MinInt8, math.MinInt8 - 1, -200, math.MinInt16, math.MinInt16 - 1, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, x := range ints {
		buf.Reset()
		if err := enc.EncodeInt(x); err != nil {
			t.Fatal(err)
		}
		if got := appendInt(nil, x); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("appendInt(%d) = % x, msgpack writes % x", x, got, buf.Bytes())
		}
		if x < 0 {
			continue
		}
		buf.Reset()
		if err := enc.EncodeUint(uint64(x)); err != nil {
			t.Fatal(err)
		}
		if got := appendUint(nil, uint64(x)); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("appendUint(%d) = % x, msgpack writes % x", x, got, buf.Bytes())
		}
	}
}
