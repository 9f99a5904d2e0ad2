package pagewalk

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// headerAt is the file offset of the header of bucket name held on a leaf
// page of bucket parent (both checked by p), found by reading the leaf's
// elements from raw.
func headerAt(t *testing.T, raw []byte, p *Paths, parent Bucket, name string) int {
	t.Helper()
	if !p.Range(parent, []byte(name), append([]byte(name), 0)) {
		t.Fatal(p.Problems)
	}
	want := p.leafOf(parent, []byte(name))
	for id, pg := range p.pages {
		if pg != want {
			continue
		}
		buf := raw[id*testPageSize:]
		for i := range int(ne.Uint16(buf[10:])) {
			at := boltHeaderSize + i*boltElemSize
			e := buf[at:]
			pos, ksize := int(ne.Uint32(e[4:])), int(ne.Uint32(e[8:]))
			if ne.Uint32(e)&boltBucketFlag != 0 && string(buf[at+pos:at+pos+ksize]) == name {
				return int(id)*testPageSize + at + pos + ksize
			}
		}
	}
	t.Fatalf("no header of %q found", name)
	return 0
}

// leafWithKeys is the id of a leaf page of bucket a holding more than two
// keys, as p checked it.
func leafWithKeys(t *testing.T, p *Paths, a Bucket) uint64 {
	t.Helper()
	if !p.All(a) {
		t.Fatal(p.Problems)
	}
	for id, pg := range p.pages {
		if pg.leaf && len(pg.keys) > 2 && pg.from.bucket == "" && pg.from.parent != 0 {
			return id
		}
	}
	t.Fatal("no leaf of bucket a with keys")
	return 0
}

// A walk checks the header of every bucket its scope reads in part or
// whole, whatever page of the bucket's own it then reads: a header that
// says root 0 with no inline page after it (bbolt would index past the
// value when the bucket is opened), or a root page outside the file. A
// bucket the scope skips is not looked at, so damage there is not the
// walk's. And a leaf page whose element count lost one reads as a
// shorter, sound page unless the elements' packing is checked.
func TestWalkChecksWhatItsScopeOpens(t *testing.T) {
	path, _ := buildBolt(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPaths(t, path)
	a, _, _ := subs(t, p)
	bHeader := headerAt(t, raw, p, a, "b")
	cHeader := headerAt(t, raw, p, a, "c")
	leaf := leafWithKeys(t, p, a)

	onlyA := func(r Reach) Scope {
		return func(path string) Reach {
			if path == "a" {
				return Whole
			}
			return r
		}
	}
	for _, c := range []struct {
		name   string
		damage func(b []byte)
		scope  Scope
		want   string // in the problems; "" for none
	}{
		{"sound, headers only", func([]byte) {}, onlyA(Header), ""},
		{"root 0 and no inline page", func(b []byte) { ne.PutUint64(b[bHeader:], 0) }, onlyA(Header),
			"a/b: inline bucket page is damaged"},
		{"root 0 and no inline page, walked whole", func(b []byte) { ne.PutUint64(b[bHeader:], 0) }, nil,
			"a/b: inline bucket page is damaged"},
		{"root 0 and no inline page, skipped", func(b []byte) { ne.PutUint64(b[bHeader:], 0) }, onlyA(Skip), ""},
		{"root past the file", func(b []byte) { ne.PutUint64(b[bHeader:], 1<<40) }, onlyA(Header),
			"a/b: root page 1099511627776 outside"},
		{"root a meta page", func(b []byte) { ne.PutUint64(b[bHeader:], 1) }, onlyA(Header), "a/b: root page 1 outside"},
		{"an inline page with more elements than fit", func(b []byte) { ne.PutUint16(b[cHeader+16+10:], 200) }, onlyA(Header),
			"a/c: inline bucket page holds 200 elements"},
		{"an inline page whose count lost one", func(b []byte) { ne.PutUint16(b[cHeader+16+10:], 0) }, onlyA(Header),
			"a/c: inline bucket page's elements end at byte 16 of its 34"},
		{"a leaf whose count lost one", func(b []byte) {
			n := ne.Uint16(b[int(leaf)*testPageSize+10:])
			ne.PutUint16(b[int(leaf)*testPageSize+10:], n-1)
		}, onlyA(Skip), "is not where the page's layout puts it"},
		{"a leaf whose count gained one", func(b []byte) {
			n := ne.Uint16(b[int(leaf)*testPageSize+10:])
			ne.PutUint16(b[int(leaf)*testPageSize+10:], n+1)
		}, onlyA(Skip), "is not where the page's layout puts it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(raw)
			c.damage(b)
			dpath := filepath.Join(t.TempDir(), "d.db")
			if err := os.WriteFile(dpath, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, w := Walk(openTest(t, dpath), testPageSize, 0, 0, c.scope, false)
			got := strings.Join(w.Problems, "; ")
			if c.want == "" && got != "" || !strings.Contains(got, c.want) {
				t.Errorf("problems %q, want %q", got, c.want)
			}
		})
	}
}
