package store_test

import (
	"errors"
	"os"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
)

// TestCompact: the copy holds every key, value and bucket sequence of the
// source, with its page size, in a file no larger than the source; small
// transactions (many intermediate commits) give the same copy; progress
// only grows and ends at its total; the source is not modified.
func TestCompact(t *testing.T) {
	path := tempPath(t, "src.db")
	o := storetest.Options()
	o.PageSize = 4096
	src := storetest.OpenPath(t, path, o)
	f := buildFixture(t, src)
	src.Close()
	before := fileDigest(t, path)
	ro := storetest.Options()
	ro.ReadOnly = true
	src, err := store.Open(path, ro)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, txMax := range []int64{0, 1} {
		dst := tempPath(t, "copy.db")
		var calls int
		var last, total int64
		err := store.Compact(src, dst, &store.CompactOptions{TxMaxBytes: txMax, FileMode: 0o640, OnProgress: func(done, tot int64) {
			if done < last || done > tot || (total != 0 && tot != total) {
				t.Errorf("progress %d of %d after %d of %d", done, tot, last, total)
			}
			calls, last, total = calls+1, done, tot
		}})
		if err != nil {
			t.Fatalf("TxMaxBytes %d: %v", txMax, err)
		}
		if calls < 2 || last != total || total == 0 {
			t.Errorf("TxMaxBytes %d: %d progress calls ending at %d of %d", txMax, calls, last, total)
		}
		cp, err := store.Open(dst, ro)
		if err != nil {
			t.Fatal(err)
		}
		if err := diffStores(storetest.Bolt(src), storetest.Bolt(cp)); err != nil {
			t.Errorf("TxMaxBytes %d: the copy differs: %v", txMax, err)
		}
		if cp.PageSize() != 4096 {
			t.Errorf("copy page size %d, want the source's 4096", cp.PageSize())
		}
		if got, want := dumpRun(t, cp, f.Run), dumpRun(t, src, f.Run); got.Info.ID != want.Info.ID || len(got.Nodes) != len(want.Nodes) {
			t.Errorf("copy's run: %d nodes, want %d", len(got.Nodes), len(want.Nodes))
		}
		cp.Close()
		if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("copy mode: %v %v, want 0640", fi.Mode(), err)
		}
	}
	if fileDigest(t, path) != before {
		t.Error("compact modified its source")
	}
}

// TestCompactNeverOverwrites: an existing destination is ErrExists and
// stays as it was.
func TestCompactNeverOverwrites(t *testing.T) {
	src := storetest.Open(t)
	buildFixture(t, src)
	dst := tempPath(t, "there.db")
	if err := os.WriteFile(dst, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.Compact(src, dst, nil); !errors.Is(err, model.ErrExists) {
		t.Errorf("Compact onto an existing file: %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "mine" {
		t.Errorf("the existing file now holds %q", b)
	}
	if err := store.Compact(src, tempPath(t, "x.db"), &store.CompactOptions{TxMaxBytes: -1}); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("negative TxMaxBytes: %v, want ErrInvalid", err)
	}
}

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
