package pagewalk

import (
	"bytes"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// The whole walk reads pages in place from a mapping of the file; it must
// find exactly what reading them one by one finds, on a sound file and on
// every kind of damage it reports.
func TestMappedWalkFindsWhatReadsFind(t *testing.T) {
	path, _ := buildBolt(t)
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoSync: true})
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error { // a leaf with overflow pages
			return tx.Bucket([]byte("a")).Put([]byte("big"), bytes.Repeat([]byte{7}, 3*testPageSize))
		})
		err = errors.Join(err, db.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPaths(t, path)
	a, _, _ := subs(t, p)
	if !p.All(a) {
		t.Fatal(p.Problems)
	}
	var branch, leaf uint64 // a branch page and a leaf of bucket a
	for id, pg := range p.pages {
		switch {
		case pg.from.bucket == "a" && !pg.leaf:
			branch = id
		case pg.leaf && leaf == 0 && pg.from.bucket == "" && len(pg.keys) > 2:
			leaf = id
		}
	}
	if branch == 0 || leaf == 0 {
		t.Fatalf("fixture: branch %d leaf %d", branch, leaf)
	}
	child := func(b []byte, page uint64, to uint64) {
		n := int(ne.Uint16(b[page*testPageSize+10:]))
		ne.PutUint64(b[int(page)*testPageSize+16+16*(n-1)+8:], to)
	}
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
		want   string // in the problems; "" for none
	}{
		{"sound", func(b []byte) []byte { return b }, ""},
		{"a branch's last child is itself", func(b []byte) []byte { child(b, branch, branch); return b }, "referenced twice"},
		{"a branch's last child past the file", func(b []byte) []byte { child(b, branch, 1<<40); return b }, "outside"},
		{"a page says it is another", func(b []byte) []byte { ne.PutUint64(b[leaf*testPageSize:], leaf+1); return b }, "says it is page"},
		{"a page's overflow runs past the data", func(b []byte) []byte {
			ne.PutUint32(b[leaf*testPageSize+12:], 1<<20)
			return b
		}, "overflow"},
		{"a leaf's elements point past it", func(b []byte) []byte { ne.PutUint16(b[leaf*testPageSize+10:], 0xFFFF); return b }, "more than fit"},
		{"the file cut short", func(b []byte) []byte { return b[:len(b)/2] }, "past the end of the file"},
		// A child whose offset, id × page size, wraps past 2^64, under
		// meta pages that say the file holds that many pages.
		{"a child whose offset wraps", func(b []byte) []byte {
			hugeMeta(b)
			child(b, branch, 1<<54-1)
			return b
		}, "past the end of the file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dpath := filepath.Join(t.TempDir(), "d.db")
			if err := os.WriteFile(dpath, c.damage(bytes.Clone(raw)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, mapped := walk(openTest(t, dpath), testPageSize, 0, 0, nil, false, true)
			_, read := walk(openTest(t, dpath), testPageSize, 0, 0, nil, false, false)
			if !slices.Equal(mapped.Problems, read.Problems) {
				t.Fatalf("mapped walk found %q; reading page by page found %q", mapped.Problems, read.Problems)
			}
			// Pages dropped from the mapping as the walk goes (at every
			// page here) are read again as they were.
			defer func(n int) { unmapEvery = n }(unmapEvery)
			unmapEvery = 1
			if _, remapped := walk(openTest(t, dpath), testPageSize, 0, 0, nil, false, true); !slices.Equal(remapped.Problems, read.Problems) {
				t.Fatalf("walk unmapping every page found %q; reading page by page found %q", remapped.Problems, read.Problems)
			}
			if mapped.seen.count() != read.seen.count() {
				t.Errorf("mapped walk read %d pages, reading page by page %d", mapped.seen.count(), read.seen.count())
			}
			got := strings.Join(mapped.Problems, "; ")
			if c.want == "" && got != "" || !strings.Contains(got, c.want) {
				t.Errorf("problems %q, want %q", got, c.want)
			}
		})
	}
}

// A fault reading the mapping — the file cut short by another process
// after the walk mapped it — is a problem of the walk, not a crash.
func TestAFaultInTheMappingIsAProblem(t *testing.T) {
	path, _ := buildBolt(t)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := Current(ReadMetas(f, testPageSize))
	if !ok {
		t.Fatal("no valid meta page")
	}
	data, unmap, ok := mapFile(f, fi.Size(), true)
	if !ok {
		t.Skip("this platform's walk reads page by page")
	}
	defer unmap()
	if err := f.Truncate(2 * testPageSize); err != nil { // the meta pages only
		t.Fatal(err)
	}
	w := &Walker{f: f, data: data, size: fi.Size(), pageSize: testPageSize, hwm: m.hwm}
	func() {
		defer w.faults()()
		w.tree(m.root, "", 0)
	}()
	if len(w.Problems) != 1 || !strings.Contains(w.Problems[0], "reading the file") {
		t.Fatalf("problems %q, want one fault reading the file", w.Problems)
	}
}

func (s pageSet) count() int {
	n := 0
	for id := range uint64(len(s)) * 64 {
		if s.has(id) {
			n++
		}
	}
	return n
}

// A walk marks the pages it reads in a pageSet, in any order of ids.
func TestPageSetHoldsWhatWasAdded(t *testing.T) {
	var s pageSet
	added := map[uint64]bool{}
	for _, id := range []uint64{2, 63, 64, 65, 127, 128, 319, 320, 4095, 4096, 100_000} {
		s.add(id)
		added[id] = true
		for probe := range uint64(100_100) {
			if s.has(probe) != added[probe] {
				t.Fatalf("after adding %d: has(%d) = %t", id, probe, s.has(probe))
			}
		}
	}
}

// hugeMeta sets the high-water mark of both meta pages of the file b to
// 2^60 pages, checksums renewed: every page id below it passes that bound.
func hugeMeta(b []byte) {
	for _, off := range []int{0, testPageSize} {
		m := b[off+boltHeaderSize:]
		ne.PutUint64(m[40:], 1<<60)
		h := fnv.New64a()
		h.Write(m[:56])
		ne.PutUint64(m[56:], h.Sum64())
	}
}
