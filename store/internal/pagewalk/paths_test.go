package pagewalk

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

const testPageSize = 1024

// buildBolt writes a bbolt file of 1 KiB pages: bucket "a" with nested
// bucket "a/b" (both multi-level b-trees of 8-byte keys, some deleted so
// pages were merged and separators moved) and an inline bucket "a/c".
func buildBolt(t *testing.T) (path string, keys map[string][][]byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "b.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: testPageSize, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys = map[string][][]byte{}
	err = db.Update(func(tx *bolt.Tx) error {
		a, err := tx.CreateBucket([]byte("a"))
		if err != nil {
			return err
		}
		b, err := a.CreateBucket([]byte("b"))
		if err != nil {
			return err
		}
		c, err := a.CreateBucket([]byte("c"))
		if err != nil {
			return err
		}
		if err := c.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		for i := range 3000 {
			k := binary.BigEndian.AppendUint64(nil, uint64(rng.IntN(1<<20)))
			bk := binary.BigEndian.AppendUint64(nil, uint64(i)*7)
			if err := a.Put(k, bytes.Repeat([]byte{byte(i)}, 10+i%40)); err != nil {
				return err
			}
			if err := b.Put(bk, []byte("x")); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error { // deletes: merged pages, moved separators
			cur := tx.Bucket([]byte("a")).Bucket([]byte("b")).Cursor()
			i := 0
			for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
				if i++; i%3 != 0 && i < 2000 {
					if err := cur.Delete(); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	if err == nil {
		err = db.View(func(tx *bolt.Tx) error {
			for _, name := range []string{"a", "a/b"} {
				bk := tx.Bucket([]byte("a"))
				if name == "a/b" {
					bk = bk.Bucket([]byte("b"))
				}
				_ = bk.ForEach(func(k, v []byte) error {
					if v != nil {
						keys[name] = append(keys[name], bytes.Clone(k))
					}
					return nil
				})
			}
			return nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	return path, keys
}

func newTestPaths(t *testing.T, path string) *Paths {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = db.View(func(tx *bolt.Tx) error { root = uint64(tx.Cursor().Bucket().Root()); return nil })
	_ = db.Close()
	p := NewPaths(openTest(t, path), testPageSize, root)
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); p.Release() })
	return p
}

// openTest opens path for a walk, closed when the test ends.
func openTest(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func subs(t *testing.T, p *Paths) (a, b, c Bucket) {
	t.Helper()
	var ok1, ok2, ok3 bool
	a, ok1 = p.Sub(p.Root(), "a")
	b, ok2 = p.Sub(a, "b")
	c, ok3 = p.Sub(a, "c")
	if !ok1 || !ok2 || !ok3 || c.inline == nil {
		t.Fatalf("buckets: %v %v %v (c inline %v); problems %v", ok1, ok2, ok3, c.inline != nil, p.Problems)
	}
	return a, b, c
}

// Every page of a sound file passes, and walking all of every bucket
// reads exactly the pages the whole-file walk reads.
func TestPathsPassEveryPageOfASoundFile(t *testing.T) {
	path, _ := buildBolt(t)
	p := newTestPaths(t, path)
	a, b, c := subs(t, p)
	for _, bk := range []Bucket{p.Root(), a, b, c} {
		if !p.All(bk) {
			t.Fatalf("All(%q): %v", bk.Path, p.Problems)
		}
	}
	_, w := Walk(openTest(t, path), testPageSize, 0, 0, nil, false)
	if len(w.Problems) > 0 {
		t.Fatalf("whole walk: %v", w.Problems)
	}
	seen := 0
	for id := range uint64(len(w.seen)) * 64 {
		if !w.seen.has(id) {
			continue
		}
		if _, ok := p.owner[id]; !ok && !isFreelist(t, path, id) {
			t.Errorf("page %d: read by the whole walk, not by the path walks", id)
		}
		seen++
	}
	if len(p.owner) == 0 || len(p.owner) > seen {
		t.Errorf("path walks read %d pages, the whole walk %d", len(p.owner), seen)
	}
}

func isFreelist(t *testing.T, path string, id uint64) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return ne.Uint16(b[id*testPageSize+8:]) == boltFreelistFlag
}

// A range walk checks the leaves holding every key a cursor returns while
// it steps from lo through the keys below hi, and the leaf of the key it
// stops at; a point walk the leaf of its key (or of the next key).
func TestRangeCoversWhatACursorReads(t *testing.T) {
	path, keys := buildBolt(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		p := newTestPaths(t, path)
		_, b, _ := subs(t, p)
		ks := keys["a/b"]
		lo := ks[rng.IntN(len(ks))]
		hi := binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(lo)+uint64(rng.IntN(400)))
		if trial%4 == 0 {
			hi = append(bytes.Clone(lo), 0) // a point lookup
		}
		if !p.Range(b, lo, hi) {
			t.Fatalf("Range: %v", p.Problems)
		}
		held := map[string]bool{}
		for _, pg := range p.pages {
			if pg.leaf {
				for _, k := range pg.keys {
					held[string(k)] = true
				}
			}
		}
		for _, k := range ks {
			if bytes.Compare(k, lo) >= 0 {
				if !held[string(k)] {
					t.Fatalf("trial %d [%x, %x): key %x is read but its leaf was not checked", trial, lo, hi, k)
				}
				if bytes.Compare(k, hi) >= 0 {
					break // the key the cursor stops at
				}
			}
		}
	}
}

// Damage on a walked path is found, and never loops.
func TestPathsFindDamage(t *testing.T) {
	path, keys := buildBolt(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := newTestPaths(t, path)
	a, b, _ := subs(t, p)
	if !p.All(a) {
		t.Fatal(p.Problems)
	}
	var root, leaf uint64 // the root of a/b; a leaf of a
	for id, pg := range p.pages {
		if pg.leaf && leaf == 0 && pg.from.bucket == "" && len(pg.keys) > 2 {
			leaf = id
		}
	}
	if !p.Last(b) {
		t.Fatal(p.Problems)
	}
	for id, pg := range p.pages {
		if pg.from.bucket == "a/b" {
			root = id
		}
	}
	if root == 0 || leaf == 0 || p.pages[root].leaf {
		t.Fatalf("fixture: root %d leaf %d", root, leaf)
	}
	last := keys["a/b"][len(keys["a/b"])-1]
	for _, c := range []struct {
		name   string
		damage func(b []byte)
		want   string
	}{
		{"a leaf's count one higher", func(b []byte) { b[leaf*testPageSize+10]++ }, "not where the page's layout puts it"},
		{"a leaf's count one lower", func(b []byte) { b[leaf*testPageSize+10]-- }, "not where the page's layout puts it"},
		{"two keys swapped", func(b []byte) {
			pg := p.pages[leaf]
			k0, k1 := bytes.Clone(pg.keys[0]), bytes.Clone(pg.keys[1])
			at0 := bytes.Index(b[leaf*testPageSize:], pg.keys[0]) + int(leaf)*testPageSize
			at1 := bytes.Index(b[leaf*testPageSize:], pg.keys[1]) + int(leaf)*testPageSize
			copy(b[at0:], k1)
			copy(b[at1:], k0)
		}, "out of order"},
		{"the root's last child is the root", func(b []byte) {
			n := int(ne.Uint16(b[root*testPageSize+10:]))
			ne.PutUint64(b[int(root)*testPageSize+16+16*(n-1)+8:], root)
		}, "referenced twice"},
		{"the root's last child past the file", func(b []byte) {
			n := int(ne.Uint16(b[root*testPageSize+10:]))
			ne.PutUint64(b[int(root)*testPageSize+16+16*(n-1)+8:], 1<<40)
		}, "outside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := bytes.Clone(raw)
			c.damage(d)
			dpath := filepath.Join(t.TempDir(), "d.db")
			if err := os.WriteFile(dpath, d, 0o600); err != nil {
				t.Fatal(err)
			}
			q := newTestPaths(t, dpath)
			a, b, ok := subsOK(q)
			if ok {
				ok = q.All(q.Root()) && q.All(a) && q.Range(b, last, nil)
			}
			if ok || len(q.Problems) == 0 {
				t.Fatalf("damage not found")
			}
			if got := fmt.Sprint(q.Problems); !bytes.Contains([]byte(got), []byte(c.want)) {
				t.Errorf("problems %s do not say %q", got, c.want)
			}
		})
	}
}

func subsOK(p *Paths) (a, b Bucket, ok bool) {
	a, ok = p.Sub(p.Root(), "a")
	if !ok {
		return a, b, false
	}
	b, ok = p.Sub(a, "b")
	return a, b, ok
}

// The pages checked are slices of the mapping: Release forgets them with
// it (a second Release does nothing), and the walks after it map the file
// again and check every page anew, with the same verdicts.
func TestReleaseForgetsThePagesWithTheMapping(t *testing.T) {
	path, _ := buildBolt(t)
	p := newTestPaths(t, path)
	a, b, _ := subs(t, p)
	if !p.All(a) || !p.All(b) || p.Pages() == 0 {
		t.Fatalf("first walks: %d pages, %v", p.Pages(), p.Problems)
	}
	mapped := p.data != nil
	checked := p.Pages()
	p.Close()
	p.Release()
	p.Release() // a second does nothing
	if p.Pages() != 0 || p.data != nil || p.unmap != nil {
		t.Fatalf("after Release: %d pages kept, mapped %t", p.Pages(), p.data != nil)
	}
	if err := p.Open(); err != nil {
		t.Fatal(err)
	}
	a, b, _ = subs(t, p)
	if !p.All(a) || !p.All(b) || p.Pages() != checked || (p.data != nil) != mapped {
		t.Errorf("walks after Release: %d pages (first %d), mapped %t (first %t), %v", p.Pages(), checked, p.data != nil, mapped, p.Problems)
	}
}

// A file cut short under a Paths that mapped it: the next walk's fault is
// a problem of the walk, not a crash.
func TestPathsFaultInTheMappingIsAProblem(t *testing.T) {
	path, _ := buildBolt(t)
	p := newTestPaths(t, path)
	if p.data == nil {
		t.Skip("this platform's walks read page by page")
	}
	root := p.Root()
	if err := os.Truncate(path, 2*testPageSize); err != nil { // the meta pages only
		t.Fatal(err)
	}
	if _, ok := p.Sub(root, "a"); ok || len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "reading the file") {
		t.Fatalf("Sub: ok %t, problems %q; want one fault reading the file", ok, p.Problems)
	}
}
