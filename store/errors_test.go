package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// A CorruptError names the bucket and, when one value is damaged, its key
// in hex: the line a user reads before running check or restoring.
func TestCorruptErrorMessage(t *testing.T) {
	for _, c := range []struct {
		err  *store.CorruptError
		want string
	}{
		{&store.CorruptError{Bucket: "runs/r1", Reason: "counters and group index must both exist"},
			"patrdb: corrupt: runs/r1: counters and group index must both exist"},
		{&store.CorruptError{Bucket: "runs/r1/nodes", Key: []byte{0, 1, 0xab}, Reason: "CRC32C mismatch"},
			"patrdb: corrupt value at runs/r1/nodes key 0001ab: CRC32C mismatch"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if !errors.Is(c.err, store.ErrCorrupt) {
			t.Errorf("%v does not match ErrCorrupt", c.err)
		}
	}
}
