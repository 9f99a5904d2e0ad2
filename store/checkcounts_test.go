package store_test

import (
	"errors"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// A run's counters and its group index are written together: a file with
// one and not the other is reported as exactly that, for either one.
func TestCheckCountersWithoutGroupIndex(t *testing.T) {
	for _, gone := range []string{"counts", "groupids"} {
		db := openWithout(t, gone)
		vs, err := db.Check(nil)
		if cerr := db.Close(); (err != nil && !errors.Is(err, store.ErrCorrupt)) || cerr != nil {
			t.Fatal(err, cerr)
		}
		want := store.Violation{Bucket: "runs/r1", Kind: "structure", Detail: "counters and group index must both exist or neither"}
		if len(vs) != 1 || vs[0].Bucket != want.Bucket || vs[0].Kind != want.Kind || vs[0].Detail != want.Detail || vs[0].Key != nil {
			t.Errorf("without %s: %v, want only %v", gone, vs, want)
		}
	}
}
