package pagewalk

import (
	"bytes"
	"fmt"
	"os"
)

// Paths checks only the pages that given key lookups follow, so that a
// reader of a few records of a large bucket pays for the root-to-leaf
// paths it takes, not for the bucket. The pages checked are exactly those
// a bbolt cursor can reach while it seeks to a key and steps forward
// through a range of keys, stopping at the first key past the range:
//
//   - in each branch page, the children whose keys can hold the range
//     (chosen as bbolt's binary search chooses), plus the leftmost path of
//     the next child, where a cursor stepping past the range's last key
//     lands;
//   - each page's header (id, type, overflow inside the file and below the
//     high-water mark), its elements inside the page and packed as bbolt
//     writes them (a changed element count or offset breaks the packing),
//     its keys ascending and inside the bounds its parent gives them (so a
//     cursor stepping past the range meets a key past it and stops), no
//     empty page below a bucket's root (a cursor would step over it), and
//     no page reached from two places or deeper than maxTreeDepth (no
//     cycle).
//
// Checked pages are kept, so lookups that share pages (a bucket's upper
// levels) read them once. A Paths belongs to one snapshot; the file is
// open between Open and Close, and pages stay checked across them. Where
// the platform can, the first Open maps the file and pages are read in
// place, as Walk reads them: a system call and a fresh buffer a page cost
// a checked read of a step's batch a third of its time. The checked pages
// are slices of that mapping, so it lasts until Release, which the
// snapshot's owner calls when the snapshot ends.
type Paths struct {
	Walker
	file  *os.File
	root  uint64
	pages map[uint64]*checkedPage
	owner map[uint64]uint64 // page id → the page whose overflow covers it
	unmap func()            // ends the mapping; nil while the file is not mapped
}

// Bucket is a bucket whose header (and, for an inline bucket, whose page)
// a Paths checked.
type Bucket struct {
	Path   string
	root   uint64
	inline *checkedPage
}

// checkedPage is a page that passed the checks, with its elements.
type checkedPage struct {
	from  edge
	leaf  bool
	keys  [][]byte
	kids  []uint64 // branch: child page ids
	flags []uint32 // leaf
	vals  [][]byte // leaf
}

// edge is where a page was reached from: an element of a branch page, or
// a bucket's header.
type edge struct {
	parent uint64
	index  int
	bucket string
}

// NewPaths prepares path walks over the snapshot whose root bucket is at
// page root of file, which the caller holds open and closes (as File's).
func NewPaths(file *os.File, pageSize int, root uint64) *Paths {
	return &Paths{Walker: Walker{pageSize: pageSize}, file: file, root: root,
		pages: map[uint64]*checkedPage{}, owner: map[uint64]uint64{}}
}

// Open starts the walks that follow on the file and reads its current
// meta page (whose high-water mark bounds the pages).
func (p *Paths) Open() error {
	f := p.file
	p.f = f
	if p.unmap == nil {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		p.size = fi.Size()
		// The pages a snapshot reads lie below the high-water mark read
		// here, inside the file as it is now: a mapping of it covers them
		// for the Paths' life, whatever the file grows to later.
		if data, unmap, ok := mapFile(f, p.size, true); ok {
			p.data, p.unmap = data, unmap
		}
	}
	if p.hwm == 0 {
		m, ok := Current(ReadMetas(f, p.pageSize))
		if !ok {
			p.at("", "no valid meta page")
			return nil
		}
		p.hwm = m.hwm
	}
	return nil
}

// Close ends the walks (the file stays open: it is the caller's); the
// pages checked stay checked.
func (p *Paths) Close() { p.f = nil }

// Release ends the mapping of the file and forgets the pages checked,
// which are slices of it. A walk after it maps the file again and checks
// every page anew.
func (p *Paths) Release() {
	if p.unmap == nil {
		return
	}
	p.unmap()
	p.unmap, p.data = nil, nil
	clear(p.pages)
	clear(p.owner)
}

// Pages is how many pages the walks have checked so far.
func (p *Paths) Pages() int { return len(p.pages) }

// OK reports whether no walk found a problem.
func (p *Paths) OK() bool { return len(p.Problems) == 0 }

// Root is the root bucket.
func (p *Paths) Root() Bucket { return Bucket{root: p.root} }

// Sub checks the path to the sub-bucket name of b and the sub-bucket's
// header, as opening it reads them; ok is false when b holds no such
// bucket or a problem was found.
func (p *Paths) Sub(b Bucket, name string) (sub Bucket, ok bool) {
	defer p.faults()() // a fault in the mapping (a file cut short) is a problem
	k := []byte(name)
	if !p.Range(b, k, append(k[:len(k):len(k)], 0)) {
		return Bucket{}, false
	}
	leaf := p.leafOf(b, k)
	i := search(leaf.keys, k)
	if i >= len(leaf.keys) || !bytes.Equal(leaf.keys[i], k) || leaf.flags[i]&boltBucketFlag == 0 {
		return Bucket{}, false
	}
	sub.Path = name
	if b.Path != "" {
		sub.Path = b.Path + "/" + name
	}
	v := leaf.vals[i]
	if len(v) < 16 {
		p.at(sub.Path, "bucket header is %d bytes", len(v))
		return Bucket{}, false
	}
	if sub.root = ne.Uint64(v); sub.root != 0 {
		return sub, true
	}
	inline := v[16:]
	if msg := inlinePage(inline); msg != "" {
		p.at(sub.Path, "%s", msg)
		return Bucket{}, false
	}
	pg, msg := elements(inline, true)
	if msg == "" {
		msg = pg.inBounds(nil, nil)
	}
	if msg != "" {
		p.at(sub.Path, "inline bucket page: %s", msg)
		return Bucket{}, false
	}
	sub.inline = pg
	return sub, true
}

// Range checks the pages a cursor reads to seek to lo and step forward
// through every key below hi (nil lo: from the first key; nil hi: to the
// last), and reports whether they are sound.
func (p *Paths) Range(b Bucket, lo, hi []byte) bool { return p.walk(b, lo, hi, false) }

// Last checks the pages a cursor reads to find the last key.
func (p *Paths) Last(b Bucket) bool { return p.walk(b, nil, nil, true) }

// All checks every page of b's own b-tree (not of the buckets inside it).
func (p *Paths) All(b Bucket) bool { return p.Range(b, nil, nil) }

func (p *Paths) walk(b Bucket, lo, hi []byte, last bool) (ok bool) {
	if !p.OK() || b.inline != nil {
		return p.OK()
	}
	defer p.faults()()
	type item struct {
		id           uint64
		from         edge
		lower, upper []byte // the keys the page may hold: lower <= k < upper (nil: unbounded)
		depth        int
		first        bool // only the leftmost path: where a cursor steps on to
	}
	stack := []item{{id: b.root, from: edge{bucket: b.Path}}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.depth > maxTreeDepth {
			p.at(b.Path, "b-tree deeper than %d pages (a cycle?)", maxTreeDepth)
			return false
		}
		pg := p.page(it.id, it.from, it.lower, it.upper, it.depth > 0, b.Path)
		if pg == nil {
			return false
		}
		if pg.leaf {
			continue
		}
		n := len(pg.keys)
		i0, i1 := 0, 0
		switch {
		case it.first:
		case last:
			i0, i1 = n-1, n-1
		default:
			i0 = child(pg.keys, lo)
			i1 = n - 1
			if hi != nil {
				i1 = max(i0, search(pg.keys, hi)-1) // the last child whose keys can be below hi
			}
			if i1+1 < n {
				stack = append(stack, item{pg.kids[i1+1], edge{parent: it.id, index: i1 + 1}, pg.keys[i1+1], bound(pg, i1+2, it.upper), it.depth + 1, true})
			}
		}
		for i := i1; i >= i0; i-- {
			lower := pg.keys[i]
			if i == 0 {
				lower = it.lower // bbolt sends keys below the first separator to the first child
			}
			stack = append(stack, item{pg.kids[i], edge{parent: it.id, index: i}, lower, bound(pg, i+1, it.upper), it.depth + 1, it.first})
		}
	}
	return true
}

// bound is the upper bound of child i-1 of pg: the next separator, or the
// page's own bound after its last child.
func bound(pg *checkedPage, i int, upper []byte) []byte {
	if i < len(pg.keys) {
		return pg.keys[i]
	}
	return upper
}

// search is the index of the first key >= k (len(keys) when none is).
func search(keys [][]byte, k []byte) int {
	lo, hi := 0, len(keys)
	for lo < hi {
		m := (lo + hi) / 2
		if bytes.Compare(keys[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// leafOf descends b's checked pages to the leaf where a cursor seeking k
// stops (a walk of k must have checked them).
func (p *Paths) leafOf(b Bucket, k []byte) *checkedPage {
	if b.inline != nil {
		return b.inline
	}
	pg := p.pages[b.root]
	for !pg.leaf {
		pg = p.pages[pg.kids[child(pg.keys, k)]]
	}
	return pg
}

// child is the child of a branch page a seek for k descends into, as
// bbolt chooses it: the last whose separator is <= k, else the first.
func child(keys [][]byte, k []byte) int {
	i := search(keys, k)
	if i < len(keys) && bytes.Equal(keys[i], k) {
		return i
	}
	return max(0, i-1)
}

// page returns page id checked: read and checked on first use, then kept.
func (p *Paths) page(id uint64, from edge, lower, upper []byte, below bool, path string) *checkedPage {
	if pg := p.pages[id]; pg != nil {
		if pg.from != from {
			p.at(path, "page %d is referenced twice (a cycle or shared page)", id)
			return nil
		}
		return pg
	}
	if o, ok := p.owner[id]; ok {
		p.at(path, "page %d lies inside the overflow of page %d", id, o)
		return nil
	}
	buf := p.read(id, boltBranchFlag|boltLeafFlag, path)
	if buf == nil {
		return nil
	}
	n := uint64(len(buf) / p.pageSize)
	for i := id + 1; i < id+n; i++ {
		if _, ok := p.owner[i]; ok || p.pages[i] != nil {
			p.at(path, "page %d (overflow of %d) is referenced twice", i, id)
			return nil
		}
	}
	pg, msg := elements(buf, ne.Uint16(buf[8:]) == boltLeafFlag)
	switch {
	case msg != "":
	case len(pg.keys) == 0 && (below || !pg.leaf):
		msg = "holds no elements"
	default:
		msg = pg.inBounds(lower, upper)
	}
	if msg != "" {
		p.at(path, "page %d %s", id, msg)
		return nil
	}
	pg.from = from
	p.pages[id] = pg
	for i := id; i < id+n; i++ {
		p.owner[i] = id
	}
	return pg
}

// elements decodes a branch or leaf page's elements, which must lie inside
// the page, packed one after another right after the element headers (as
// bbolt writes every page), with keys ascending.
func elements(buf []byte, leaf bool) (*checkedPage, string) {
	count := int(ne.Uint16(buf[10:]))
	if boltHeaderSize+count*boltElemSize > len(buf) {
		return nil, fmt.Sprintf("holds %d elements, more than fit", count)
	}
	if _, msg := packed(buf, leaf); msg != "" {
		return nil, msg
	}
	pg := &checkedPage{leaf: leaf, keys: make([][]byte, count)}
	if leaf {
		pg.flags, pg.vals = make([]uint32, count), make([][]byte, count)
	} else {
		pg.kids = make([]uint64, count)
	}
	for i := 0; i < count; i++ {
		at := uint64(boltHeaderSize + i*boltElemSize)
		e := buf[at:]
		if leaf {
			start, ksize, vsize := at+uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
			pg.flags[i] = ne.Uint32(e)
			pg.keys[i] = buf[start : start+ksize : start+ksize]
			pg.vals[i] = buf[start+ksize : start+ksize+vsize : start+ksize+vsize]
		} else {
			start, ksize := at+uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:]))
			pg.kids[i] = ne.Uint64(e[8:])
			pg.keys[i] = buf[start : start+ksize : start+ksize]
		}
		if i > 0 && bytes.Compare(pg.keys[i-1], pg.keys[i]) >= 0 {
			return nil, fmt.Sprintf("keys %d and %d are out of order", i-1, i)
		}
	}
	return pg, ""
}

// inBounds checks that the page's keys lie in [lower, upper).
func (pg *checkedPage) inBounds(lower, upper []byte) string {
	n := len(pg.keys)
	switch {
	case n == 0:
	case lower != nil && bytes.Compare(pg.keys[0], lower) < 0:
		return "holds a key below its parent's separator"
	case upper != nil && bytes.Compare(pg.keys[n-1], upper) >= 0:
		return "holds a key at or above the next separator"
	}
	return ""
}
