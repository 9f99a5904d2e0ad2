package store

import (
	"errors"
	"runtime"
	"testing"

	"github.com/patrdb/patrdb/model"
)

// An event read from the log whose lengths claim more than the value holds
// is corrupt, reported as such, and read without allocating what the
// headers claim: the log is read one event per key, so a damaged event
// must not cost gigabytes.
func TestDecodeEventBoundsLengths(t *testing.T) {
	huge := [][]byte{
		{0x98, 0x01, 0x02, 0xa1, 'x', 0, 0, 0, 0, 0xc6, 0xff, 0xff, 0xff, 0x00}, // payload a 4 GB bin32
		{0x98, 0x01, 0x02, 0xdb, 0xff, 0xff, 0xff, 0x00},                        // kind a 4 GB str32
		{0xdd, 0xff, 0xff, 0xff, 0xff},                                          // array32 of 4G elements
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 20 {
		for _, p := range huge {
			var e model.Event
			err := decodeEvent("runs/r/events", []byte{1}, frameFor(p), &e, nil)
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Reason != "decode: a length exceeds the value" {
				t.Fatalf("% x: %v, want a CorruptError for a length exceeding the value", p, err)
			}
			if e.Seq != 0 || e.Kind != "" || e.Payload != nil {
				t.Fatalf("% x: a failed decode left %+v, want the zero event", p, e)
			}
		}
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("decoding %d tiny damaged events allocated %d MB", 20*len(huge), got>>20)
	}
}
