// Package pagewalk is a guarded walk over bbolt's page structure, read
// from the file with explicit bounds. bbolt trusts its pages: a damaged
// page header sends its own Check into a loop of up to 2^32 steps (the
// overflow count), a cycle of branch pages into unbounded recursion (a
// fatal stack overflow that recover cannot catch), an out-of-range page id
// into a fault past the mmap, and a damaged freelist count into an
// allocation of any size. So Open walks the pages it is about to read
// (meta pages, freelist, root bucket, meta bucket) and Check walks every
// page of its snapshot before bbolt or a cursor touches them; damage
// becomes a violation or ErrCorrupt instead. A whole walk maps the file
// read-only and reads its pages in place, every offset checked against
// the file's size; a fault in the mapping (the file cut short while it
// runs) is a problem too, and the pages read are dropped from the
// mapping as it goes, so the process does not count the file twice beside
// bbolt's own mapping. The walks of a few pages (PreOpen, Paths) read each
// page into a buffer of its own.
//
// The layout is bbolt's on-disk format (unchanged since 1.3, native byte
// order): a 16-byte page header (id u64, flags u16, count u16, overflow
// u32); 16-byte branch elements (pos u32, ksize u32, pgid u64) and leaf
// elements (flags u32, pos u32, ksize u32, vsize u32), pos counted from the
// element; a bucket value is (root pgid u64, sequence u64), followed by an
// inline leaf page when root is 0; the meta sits after the header of pages
// 0 and 1: magic, version, page size, flags (u32 each), root bucket (16 B),
// freelist, high-water mark, txid (u64 each), then an FNV-1a checksum of
// the preceding 56 bytes.
//
// It is the store's second reader of the file, kept apart so bbolt's byte
// layout is read in one place; only package store imports it.
package pagewalk

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
)

const (
	boltHeaderSize   = 16
	boltElemSize     = 16
	boltBranchFlag   = 0x01
	boltLeafFlag     = 0x02
	boltMetaFlag     = 0x04
	boltFreelistFlag = 0x10
	boltBucketFlag   = 0x01
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	boltNoFreelist   = ^uint64(0)
	maxTreeDepth     = 64 // far deeper than any real b-tree of buckets within buckets
)

var ne = binary.NativeEndian

// Meta is a decoded meta page.
type Meta struct {
	page     int
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // high-water mark: pages below it are in use or free
	txid     uint64
	Err      string // why the page is invalid; empty when valid
}

// ReadMetas decodes the two meta pages; pageSize locates the second.
func ReadMetas(f io.ReaderAt, pageSize int) [2]Meta {
	return [2]Meta{readMeta(f, 0, 0), readMeta(f, 1, int64(pageSize))}
}

func readMeta(f io.ReaderAt, page int, off int64) Meta {
	m := Meta{page: page}
	buf := make([]byte, boltHeaderSize+64)
	if _, err := f.ReadAt(buf, off); err != nil {
		m.Err = "unreadable: " + err.Error()
		return m
	}
	b := buf[boltHeaderSize:]
	m.pageSize = ne.Uint32(b[8:])
	m.root = ne.Uint64(b[16:])
	m.freelist = ne.Uint64(b[32:])
	m.hwm = ne.Uint64(b[40:])
	m.txid = ne.Uint64(b[48:])
	h := fnv.New64a()
	h.Write(b[:56])
	switch {
	case ne.Uint32(b[0:]) != boltMagic:
		m.Err = "bad magic"
	case ne.Uint32(b[4:]) != boltVersion:
		m.Err = "unknown bbolt version"
	case h.Sum64() != ne.Uint64(b[56:]):
		m.Err = "checksum mismatch"
	case m.root >= m.hwm || (m.freelist != boltNoFreelist && m.freelist >= m.hwm):
		m.Err = "root or freelist page above the high-water mark"
	}
	return m
}

// Fallback describes a damaged meta page.
func (m Meta) Fallback() string {
	return fmt.Sprintf("meta page %d: %s (bbolt falls back to the other meta page, so the last commit may be lost)", m.page, m.Err)
}

// Current returns the meta bbolt uses: the valid one with the higher txid.
func Current(ms [2]Meta) (Meta, bool) {
	a, b := ms[0], ms[1]
	if b.txid > a.txid {
		a, b = b, a
	}
	switch {
	case a.Err == "":
		return a, true
	case b.Err == "":
		return b, true
	}
	return Meta{}, false
}

// Walker checks pages read from the file. It never recurses on data
// read from the file beyond maxTreeDepth and reads each page at most once.
type Walker struct {
	f io.ReaderAt
	// data is the file mapped read-only during Walk: its pages are read
	// in place, where reading each into a buffer of its own cost a system
	// call and an allocation a page (a quarter of a whole-run check of a
	// million nodes went to them). nil: pages are read from f.
	data     []byte
	mapped   int // pages read from data since they were last unmapped
	size     int64
	pageSize int
	hwm      uint64
	seen     pageSet
	Problems []string
	// firstPath and firstMsg are the first problem, split at its bucket.
	FirstPath, FirstMsg string
	// scope says how much of the sub-bucket at path to read; nil reads
	// every bucket whole.
	scope Scope
}

// Reach is how much of a bucket a walk reads.
type Reach int

const (
	// Skip: none of it. The reader does not open the bucket (a list of
	// the runs does not open each run's bucket).
	Skip Reach = iota
	// Header: the bucket's header, and an inline bucket's page, which is
	// what opening the bucket reads; none of its pages. A reader that
	// opens a bucket it does not read (a run's handle opens every
	// sub-bucket of the run) needs them sound: bbolt takes a header with
	// root 0 and no inline page after it as an inline bucket and indexes
	// past its value.
	Header
	// Whole: every page of the bucket, and the buckets inside it as the
	// scope says.
	Whole
)

// Scope says how much of the bucket at path (e.g. "runs/r1/nodes") a walk
// reads.
type Scope func(path string) Reach

func (w *Walker) reach(path string) Reach {
	if w.scope == nil {
		return Whole
	}
	return w.scope(path)
}

const maxPageProblems = 100

// at records a problem in the bucket at path ("" for the file as a whole).
// The first one is also kept apart, for callers that report one line.
func (w *Walker) at(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if len(w.Problems) == 0 {
		w.FirstPath, w.FirstMsg = path, msg
	}
	if path != "" {
		msg = path + ": " + msg
	}
	if len(w.Problems) < maxPageProblems {
		w.Problems = append(w.Problems, msg)
	}
}

// page reads page id and its overflow pages after checking the header, once:
// a page reached twice is a problem.
func (w *Walker) page(id uint64, want uint16, path string) []byte {
	if w.seen.has(id) {
		w.at(path, "page %d is referenced twice (a cycle or shared page)", id)
		return nil
	}
	buf := w.read(id, want, path)
	if buf == nil {
		return nil
	}
	for i := id; i < id+uint64(len(buf)/w.pageSize); i++ {
		if w.seen.has(i) {
			w.at(path, "page %d (overflow of %d) is referenced twice", i, id)
			return nil
		}
		w.seen.add(i)
	}
	return buf
}

// read reads page id and its overflow pages after checking that they lie
// inside the file and below the high-water mark, that the header names
// the page and that its type is want (branch|leaf: either).
func (w *Walker) read(id uint64, want uint16, path string) []byte {
	ps := uint64(w.pageSize)
	// Ids are compared with the number of whole pages in the file, never
	// multiplied first: under a damaged high-water mark, id × page size
	// can wrap past 2^64 to an offset inside the file.
	pages := uint64(w.size) / ps
	switch {
	case id < 2 || id >= w.hwm:
		w.at(path, "page %d outside 2..%d", id, w.hwm-1)
		return nil
	case id >= pages:
		w.at(path, "page %d lies past the end of the file (%d bytes)", id, w.size)
		return nil
	}
	// The page itself in one read; its overflow, if its header claims
	// any that fit, in a second.
	var hdr []byte
	if w.data != nil {
		w.unmapNow()
		hdr = w.data[id*ps : (id+1)*ps]
	} else {
		hdr = make([]byte, ps)
		if _, err := w.f.ReadAt(hdr, int64(id*ps)); err != nil {
			w.at(path, "page %d: %v", id, err)
			return nil
		}
	}
	flags, overflow := ne.Uint16(hdr[8:]), uint64(ne.Uint32(hdr[12:]))
	switch {
	case ne.Uint64(hdr) != id:
		w.at(path, "page %d says it is page %d", id, ne.Uint64(hdr))
		return nil
	case flags != want && !(want == boltBranchFlag|boltLeafFlag && (flags == boltBranchFlag || flags == boltLeafFlag)):
		w.at(path, "page %d has type flags %#x", id, flags)
		return nil
	case id+overflow >= w.hwm || id+overflow >= pages:
		w.at(path, "page %d claims %d overflow pages, past the end of the data", id, overflow)
		return nil
	}
	if overflow == 0 {
		return hdr
	}
	if w.data != nil {
		return w.data[id*ps : (id+overflow+1)*ps]
	}
	buf := make([]byte, (overflow+1)*ps)
	copy(buf, hdr)
	if _, err := w.f.ReadAt(buf[ps:], int64((id+1)*ps)); err != nil {
		w.at(path, "page %d: %v", id, err)
		return nil
	}
	return buf
}

// freelist checks the freelist page: its ids must fit in its pages.
func (w *Walker) freelist(id uint64) {
	if id == boltNoFreelist {
		return
	}
	buf := w.page(id, boltFreelistFlag, "(freelist)")
	if buf == nil {
		return
	}
	n, start := uint64(ne.Uint16(buf[10:])), uint64(boltHeaderSize)
	if n == 0xFFFF {
		if len(buf) < boltHeaderSize+8 {
			w.at("(freelist)", "page %d too short for its count", id)
			return
		}
		n, start = ne.Uint64(buf[boltHeaderSize:]), boltHeaderSize+8
	}
	if n > (uint64(len(buf))-start)/8 {
		w.at("(freelist)", "page %d claims %d free ids, more than its pages hold", id, n)
	}
}

// tree walks the b-tree rooted at page root.
func (w *Walker) tree(root uint64, path string, depth int) {
	type item struct {
		id    uint64
		depth int
	}
	stack := []item{{root, depth}}
	for len(stack) > 0 && len(w.Problems) < maxPageProblems {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.depth > maxTreeDepth {
			w.at(path, "b-tree deeper than %d pages (a cycle?)", maxTreeDepth)
			return
		}
		buf := w.page(it.id, boltBranchFlag|boltLeafFlag, path)
		if buf == nil {
			continue
		}
		if ne.Uint16(buf[8:]) == boltLeafFlag {
			w.leaf(buf, path, it.depth)
			continue
		}
		count := int(ne.Uint16(buf[10:]))
		if count == 0 || boltHeaderSize+count*boltElemSize > len(buf) {
			w.at(path, "branch page %d holds %d elements", it.id, count)
			continue
		}
		next := uint64(boltHeaderSize + count*boltElemSize) // where the next key must start (packed)
		for i := 0; i < count; i++ {
			at := uint64(boltHeaderSize + i*boltElemSize)
			e := buf[at:]
			if msg := packedAt(buf, i, at+uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:])), &next); msg != "" {
				w.at(path, "branch page %d %s", it.id, msg)
				stack = stack[:len(stack)-i] // none of this page's children
				break
			}
			stack = append(stack, item{ne.Uint64(e[8:]), it.depth + 1})
		}
	}
}

// leaf checks the elements of a leaf page (or an inline bucket's page) and
// walks the buckets it holds as the scope says.
func (w *Walker) leaf(buf []byte, path string, depth int) {
	count := int(ne.Uint16(buf[10:]))
	if boltHeaderSize+count*boltElemSize > len(buf) {
		w.at(path, "leaf page %d holds %d elements, more than fit", ne.Uint64(buf), count)
		return
	}
	next := uint64(boltHeaderSize + count*boltElemSize) // where the next key must start (packed)
	for i := 0; i < count; i++ {
		at := uint64(boltHeaderSize + i*boltElemSize)
		e := buf[at:]
		flags, pos, ksize, vsize := ne.Uint32(e), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		if msg := packedAt(buf, i, at+pos, ksize+vsize, &next); msg != "" {
			w.at(path, "leaf page %d %s", ne.Uint64(buf), msg)
			return
		}
		if flags&boltBucketFlag == 0 {
			continue
		}
		kstart := at + pos
		sub := path + "/" + string(buf[kstart:kstart+ksize])
		if path == "" {
			sub = string(buf[kstart : kstart+ksize])
		}
		reach := w.reach(sub)
		if reach == Skip {
			continue
		}
		v := buf[kstart+ksize : kstart+ksize+vsize]
		if len(v) < 16 {
			w.at(sub, "bucket header is %d bytes", len(v))
			continue
		}
		if depth+1 > maxTreeDepth {
			w.at(sub, "buckets nested deeper than %d", maxTreeDepth)
			continue
		}
		if root := ne.Uint64(v); root != 0 {
			if reach == Header {
				w.rootInFile(root, sub)
			} else {
				w.tree(root, sub, depth+1)
			}
			continue
		}
		inline := v[16:]
		if msg := inlinePage(inline); msg != "" {
			w.at(sub, "%s", msg)
			continue
		}
		if reach == Header {
			continue
		}
		w.leaf(inline, sub, depth+1)
	}
}

// rootInFile checks, without reading it, that a bucket's root page id
// lies inside the file and below the high-water mark.
func (w *Walker) rootInFile(id uint64, path string) {
	switch pages := uint64(w.size) / uint64(w.pageSize); {
	case id < 2 || id >= w.hwm:
		w.at(path, "root page %d outside 2..%d", id, w.hwm-1)
	case id >= pages:
		w.at(path, "root page %d lies past the end of the file (%d bytes)", id, w.size)
	}
}

// inlinePage checks an inline bucket's page (the bucket's value after its
// header) as opening the bucket reads it: a leaf whose elements fit and
// are packed, the last ending where the value ends (bbolt sizes the value
// to the page, so a count that lost an element shows). "" when it is
// sound.
func inlinePage(inline []byte) string {
	if len(inline) < boltHeaderSize || ne.Uint16(inline[8:]) != boltLeafFlag {
		return "inline bucket page is damaged"
	}
	if n := int(ne.Uint16(inline[10:])); boltHeaderSize+n*boltElemSize > len(inline) {
		return fmt.Sprintf("inline bucket page holds %d elements, more than fit", n)
	}
	end, msg := packed(inline, true)
	switch {
	case msg != "":
		return "inline bucket page " + msg
	case end != uint64(len(inline)):
		return fmt.Sprintf("inline bucket page's elements end at byte %d of its %d", end, len(inline))
	}
	return ""
}

// packed checks that the elements of a branch or leaf page whose element
// headers fit lie inside it, packed one after another right after the
// headers, as bbolt writes every page: a changed element count or offset
// breaks the packing (a leaf that lost its last element from its count
// would otherwise read as a shorter, sound page). It returns where the
// last element ends, and "" when they are packed.
func packed(buf []byte, leaf bool) (end uint64, msg string) {
	count := int(ne.Uint16(buf[10:]))
	next := uint64(boltHeaderSize + count*boltElemSize)
	for i := 0; i < count; i++ {
		at := uint64(boltHeaderSize + i*boltElemSize)
		e := buf[at:]
		var pos, size uint64
		if leaf {
			pos, size = uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:]))+uint64(ne.Uint32(e[12:]))
		} else {
			pos, size = uint64(ne.Uint32(e)), uint64(ne.Uint32(e[4:]))
		}
		if msg := packedAt(buf, i, at+pos, size, &next); msg != "" {
			return 0, msg
		}
	}
	return next, ""
}

// packedAt checks that element i, whose key starts at start and whose key
// and value take size bytes, starts at *next (where the one before it
// ended, or after the element headers) and ends inside buf; *next moves
// past it.
func packedAt(buf []byte, i int, start, size uint64, next *uint64) string {
	switch {
	case start != *next:
		return fmt.Sprintf("element %d is not where the page's layout puts it", i)
	case start+size > uint64(len(buf)):
		return fmt.Sprintf("element %d points past the page", i)
	}
	*next = start + size
	return ""
}

// File checks the file's meta pages, freelist and b-trees. A reader
// passes its snapshot's txid and root page; txid 0 walks what bbolt would
// open. scope says how much of each bucket is read (nil: all of every
// one). With reportMetas, a damaged meta page is reported in metas even
// when the other one is good; only a caller that keeps commits out may
// ask, as a meta page being written reads torn. Problems with the pages a
// reader would follow are in pages.
//
// f is the file bbolt has open, held by the caller, who closes it: a walk
// of whatever is at the file's path now could check another file than the
// one being read, once something has been renamed over it.
func File(f *os.File, pageSize int, txid, root uint64, scope Scope, reportMetas bool) (metas, pages []string) {
	metas, w := Walk(f, pageSize, txid, root, scope, reportMetas)
	return metas, w.Problems
}

// Walk is File returning the walker, which keeps the first
// problem apart.
func Walk(f *os.File, pageSize int, txid, root uint64, scope Scope, reportMetas bool) (metas []string, w *Walker) {
	return walk(f, pageSize, txid, root, scope, reportMetas, true)
}

// walk is Walk; mapped says whether to map the file where the platform
// can, rather than read it page by page.
func walk(f *os.File, pageSize int, txid, root uint64, scope Scope, reportMetas, mapped bool) (metas []string, w *Walker) {
	w = &Walker{scope: scope}
	fi, err := f.Stat()
	if err != nil {
		w.at("", "%v", err)
		return nil, w
	}
	ms := ReadMetas(f, pageSize)
	if reportMetas {
		for _, m := range ms {
			if m.Err != "" {
				metas = append(metas, m.Fallback())
			}
		}
	}
	// The newest valid meta bounds the pages (the high-water mark never
	// goes down); the snapshot's own meta, if it is that one, names its
	// freelist.
	m, ok := Current(ms)
	if !ok {
		w.at("", "no valid meta page")
		return metas, w
	}
	w.f, w.size, w.pageSize, w.hwm = f, fi.Size(), pageSize, m.hwm
	if data, unmap, ok := mapFile(f, w.size, mapped); ok {
		defer unmap()
		w.data = data
		defer w.faults()()
	}
	if txid == 0 || txid == m.txid {
		w.freelist(m.freelist)
	}
	if root == 0 {
		root = m.root
	}
	w.tree(root, "", 0)
	return metas, w
}

// unmapEvery is how many pages a walk reads from its mapping before it
// drops them all from the process's page tables. The file's pages stay in
// the page cache, but each mapping counts them in the process's RSS: with
// bbolt's own mapping of the same file, the check of a 1.4 GB file peaked
// at 2.8 GB. 16,384 pages is 64 MiB at 4 KiB; the pages of a page being
// read when they go are mapped again on their next read. (A variable for
// the tests, which unmap at every page.)
var unmapEvery = 1 << 14

func (w *Walker) unmapNow() {
	if w.mapped++; w.mapped >= unmapEvery {
		unmapPages(w.data)
		w.mapped = 0
	}
}

// faults turns a fault reading the mapped file — another process cut the
// file short during the walk, or the disk failed under it — into a
// problem instead of a crash, until the function it returns is called
// (deferred, after the walk).
func (w *Walker) faults() func() {
	was := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(was)
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); !fault {
				panic(p)
			}
			w.at("", "reading the file: %v", p)
		}
	}
}

// PreOpen looks, before bbolt maps the file, at what bbolt.Open
// trusts without bounds: that the file reaches the high-water mark of the
// meta it will pick (a truncated file faults on the first read past its
// end) and, when freelist is set (a writable open loads it at once), that
// the freelist's count fits its pages (a damaged count makes bbolt
// allocate any size). It runs before bbolt takes the file lock, so a live
// writer in another process may move the pages under it: damage counts
// only if the meta pages did not change while it looked.
func PreOpen(path string, freelist bool) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt reports it
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	// The page size, found the way bbolt finds it: from the first valid
	// meta page (the second sits at one page size, 1 KiB to 16 MiB).
	ps := 0
	if m := readMeta(f, 0, 0); m.Err == "" {
		ps = int(m.pageSize)
	}
	for i := 0; ps == 0 && i <= 14 && int64(1024<<i) < fi.Size()-1024; i++ {
		if m := readMeta(f, 1, int64(1024<<i)); m.Err == "" && int(m.pageSize) == 1024<<i {
			ps = 1024 << i
		}
	}
	if ps < boltHeaderSize+64 {
		return nil // no valid meta page: bbolt refuses the file itself
	}
	ms := ReadMetas(f, ps)
	m, ok := Current(ms)
	if !ok {
		return nil
	}
	w := &Walker{f: f, size: fi.Size(), pageSize: ps, hwm: m.hwm}
	if uint64(fi.Size()) < m.hwm*uint64(ps) {
		w.at("", "the file is %d bytes but its pages reach %d: it was truncated", fi.Size(), m.hwm*uint64(ps))
	} else if freelist {
		w.freelist(m.freelist)
	}
	if len(w.Problems) == 0 || ReadMetas(f, ps) != ms {
		return nil
	}
	return w.Problems
}

// pageSet is a set of page ids, a bit each: a walk of a big file marks
// every page, and the ids are dense below the high-water mark.
type pageSet []uint64

func (s pageSet) has(id uint64) bool { return id/64 < uint64(len(s)) && s[id/64]&(1<<(id%64)) != 0 }

func (s *pageSet) add(id uint64) {
	if n := id/64 + 1; n > uint64(len(*s)) {
		*s = append(*s, make([]uint64, n-uint64(len(*s)))...)
	}
	(*s)[id/64] |= 1 << (id % 64)
}
