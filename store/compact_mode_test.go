package store_test

import (
	"os"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// Without options the compacted copy is private to its owner (0600), as
// the store's own files are; a given FileMode is used as is.
func TestCompactFileMode(t *testing.T) {
	src, err := store.Open(goodFile(t), syncOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, c := range []struct {
		opts *store.CompactOptions
		want os.FileMode
	}{
		{nil, 0o600},
		{&store.CompactOptions{}, 0o600},
		{&store.CompactOptions{FileMode: 0o640}, 0o640},
	} {
		dst := tempPath(t, "copy.db")
		if err := store.Compact(src, dst, c.opts); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		// The umask may clear group and other bits, never the owner's
		// (or no test could write a file).
		if got := st.Mode().Perm(); got&0o700 != c.want&0o700 || got&^c.want != 0 {
			t.Errorf("Compact with %+v: mode %v, want %v (less the umask)", c.opts, got, c.want)
		}
		os.Remove(dst)
	}
}
