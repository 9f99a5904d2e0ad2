package store

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
)

// Violation is one problem Check found.
type Violation struct {
	Bucket string `json:"bucket"`
	Key    []byte `json:"key,omitempty"`
	Kind   string `json:"kind"` // "structure", "corrupt", "invariant"
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	if v.Key != nil {
		return fmt.Sprintf("%s: %s key %x: %s", v.Kind, v.Bucket, v.Key, v.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", v.Kind, v.Bucket, v.Detail)
}

// maxViolations bounds the report on a badly damaged file.
const maxViolations = 1000

// Check verifies the whole file: both meta pages, bbolt's page structure
// (walked with bounds first, pagewalk.go), every value's CRC and decoding,
// and the data model's invariants (parents exist and precede their
// children, fork points in range, depth and base consistent, the children
// index equals the parent pointers, the frontier equals the active nodes,
// turns are contiguous, events are numbered 1..n, advantages refer to
// leaves of their group, rubric pools are valid, id sequences cover every
// id, every record equals what the event log last wrote for it). The error
// is for failures to read at all; a damaged file yields violations, never a
// panic or a hang.
//
// Writers wait while it runs: bbolt's free-page accounting reads the live
// freelist, which must describe the snapshot being checked, and the meta
// pages must not be rewritten while they are compared. So do not call it
// inside an Update function; use Tx.Check there.
func (db *DB) Check() (vs []Violation, err error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	err = db.View(func(tx *Tx) error {
		vs = tx.runCheck(true)
		return nil
	})
	return vs, err
}

// Check runs the integrity check inside an existing transaction. In a
// read-only transaction of a writable DB, the free-page accounting and the
// meta-page comparison need the snapshot to be the latest commit and no
// write in progress; otherwise they are skipped (DB.Check waits instead).
func (tx *Tx) Check() []Violation {
	if tx.Writable() || tx.db.opts.ReadOnly {
		return tx.runCheck(true)
	}
	if !tx.db.writeMu.TryLock() {
		return tx.runCheck(false)
	}
	defer tx.db.writeMu.Unlock()
	return tx.runCheck(tx.snapshot == tx.db.cache.latest())
}

// runCheck runs the checks; quiet says no commit has happened since the
// snapshot and none can start, so bbolt's page accounting and the meta
// pages describe it.
func (tx *Tx) runCheck(quiet bool) (vs []Violation) {
	c := &checker{tx: tx}
	if !c.pages(quiet) {
		return c.vs
	}
	if quiet {
		c.guard("(file)", func() {
			for e := range tx.btx.Check() {
				c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: e.Error()})
			}
		})
	}
	c.guard("meta", c.meta)
	c.guard("runs", func() {
		ids, err := tx.RunIDs()
		if err != nil {
			c.add(Violation{Bucket: "runs", Kind: "structure", Detail: err.Error()})
			return
		}
		for _, id := range ids {
			c.guard("runs/"+id, func() { c.run(id) })
		}
	})
	return c.vs
}

// pages walks the snapshot's pages from the file with bounds (pagewalk.go)
// before bbolt's check or a cursor trusts them, and reports whether the
// b-trees are sound; if not, the rest of the check would loop or crash on
// them and is skipped. A damaged meta page is reported too when quiet. A
// write transaction's pages are not on disk yet: it relies on bbolt alone.
func (c *checker) pages(quiet bool) bool {
	tx := c.tx
	if tx.Writable() {
		return true
	}
	var metas []string
	pages := []string{"the page walk did not finish"}
	c.guard("(file)", func() {
		metas, pages = walkFile(tx.db.path, tx.btx.DB().Info().PageSize, uint64(tx.btx.ID()),
			uint64(tx.btx.Cursor().Bucket().Root()), nil, quiet)
	})
	for _, p := range append(metas, pages...) {
		c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: p})
	}
	return len(pages) == 0
}

type checker struct {
	tx *Tx
	vs []Violation
}

func (c *checker) add(v Violation) {
	if len(c.vs) < maxViolations {
		c.vs = append(c.vs, v)
	}
}

func (c *checker) fromErr(bucket string, err error) {
	var ce *CorruptError
	if errors.As(err, &ce) {
		c.add(Violation{Bucket: ce.Bucket, Key: ce.Key, Kind: "corrupt", Detail: ce.Reason})
		return
	}
	c.add(Violation{Bucket: bucket, Kind: "structure", Detail: err.Error()})
}

// guard turns a panic or memory fault inside bbolt (a damaged page) into a
// violation so a broken file is reported, not fatal.
func (c *checker) guard(bucket string, fn func()) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			c.add(Violation{Bucket: bucket, Kind: "structure", Detail: fmt.Sprintf("reading failed: %v", r)})
		}
	}()
	fn()
}

func (c *checker) meta() {
	m := c.tx.btx.Bucket(bucketMeta)
	if m == nil {
		c.add(Violation{Bucket: "meta", Kind: "structure", Detail: "meta bucket missing"})
		return
	}
	if string(m.Get(metaMagic)) != string(magicString) {
		c.add(Violation{Bucket: "meta", Key: metaMagic, Kind: "corrupt", Detail: "bad magic"})
	}
	if v := m.Get(metaFormat); len(v) != 8 || (keyU64(v, 0) != FormatVersion && !readableAsIs[keyU64(v, 0)]) {
		c.add(Violation{Bucket: "meta", Key: metaFormat, Kind: "corrupt", Detail: "format version unreadable or unexpected"})
	}
	if !bytes.HasPrefix(m.Get(metaWriter), []byte("patrdb ")) {
		c.add(Violation{Bucket: "meta", Key: metaWriter, Kind: "corrupt", Detail: "writer missing or unreadable"})
	}
	// Nothing else lives in meta: another key is a damaged one.
	_ = m.ForEach(func(k, _ []byte) error {
		if !bytes.Equal(k, metaMagic) && !bytes.Equal(k, metaFormat) && !bytes.Equal(k, metaWriter) {
			c.add(Violation{Bucket: "meta", Key: cloneBytes(k), Kind: "corrupt", Detail: "unexpected key"})
		}
		return nil
	})
}

func (c *checker) run(id string) {
	r, err := c.tx.Run(id)
	if err != nil {
		c.fromErr("runs/"+id, err)
		return
	}
	for _, name := range subBuckets {
		if r.sub[name] == nil {
			c.add(Violation{Bucket: r.path, Kind: "structure", Detail: "missing sub-bucket " + name})
			return
		}
	}
	clean := len(c.vs)
	info, err := r.Info()
	if err != nil {
		c.fromErr(r.path, err)
	} else if info.ID != id {
		c.inv(r.path, keyRun, "run record says id %q", info.ID)
	}
	groups := c.groups(r)
	for _, g := range groups {
		// A checkpoint completes its step; an open group left behind has
		// active branches that no resume will ever continue.
		if g.Status == GroupOpen && g.Step <= info.LastStep {
			c.inv(r.bpath(bGroups), u64key2(g.Step, g.ID), "open group in completed step %d: its active branches are orphaned", g.Step)
		}
	}
	nodes := c.nodes(r, groups)
	c.turns(r, nodes)
	c.children(r, nodes)
	c.frontier(r, nodes)
	c.advantages(r, nodes)
	c.rubrics(r)
	c.checkpoints(r)
	c.events(r)
	c.logMatches(r)
	c.ids(r, bGroups, 1)
	c.ids(r, bNodes, 0)
	c.ids(r, bRubrics, 0)
	if len(c.vs) == clean {
		c.counters(r, groups)
	}
}

// ids checks that a bucket's sequence covers every id in its keys (the
// idAt-th u64 of the key): a sequence below an existing id would hand that
// id to a new record, which would overwrite the old one.
func (c *checker) ids(r *RunTx, name string, idAt int) {
	b := r.sub[name]
	var top uint64
	if idAt == 0 {
		if k, _ := b.Cursor().Last(); len(k) == 8 {
			top = keyU64(k, 0)
		}
	} else {
		_ = b.ForEach(func(k, _ []byte) error {
			if len(k) == (idAt+1)*8 {
				top = max(top, keyU64(k, idAt))
			}
			return nil
		})
	}
	if top > b.Sequence() {
		c.inv(r.bpath(name), nil, "sequence %d is below id %d: new records would overwrite old ones", b.Sequence(), top)
	}
}

func (c *checker) inv(bucket string, key []byte, format string, args ...any) {
	c.add(Violation{Bucket: bucket, Key: key, Kind: "invariant", Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) groups(r *RunTx) map[uint64]Group {
	out := map[uint64]Group{}
	b := r.sub[bGroups]
	_ = b.ForEach(func(k, v []byte) error {
		var g Group
		if len(k) != 16 {
			c.inv(r.bpath(bGroups), cloneBytes(k), "key is not step|group")
			return nil
		}
		if err := decodeValue(r.bpath(bGroups), k, v, &g); err != nil {
			c.fromErr(r.bpath(bGroups), err)
			return nil
		}
		if g.Step != keyU64(k, 0) || g.ID != keyU64(k, 1) {
			c.inv(r.bpath(bGroups), cloneBytes(k), "record says step %d group %d", g.Step, g.ID)
		}
		if _, dup := out[g.ID]; dup {
			c.inv(r.bpath(bGroups), cloneBytes(k), "group id %d appears twice", g.ID)
		}
		out[g.ID] = g
		return nil
	})
	return out
}

func (c *checker) nodes(r *RunTx, groups map[uint64]Group) map[uint64]*Node {
	out := map[uint64]*Node{}
	path := r.bpath(bNodes)
	_ = r.sub[bNodes].ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			c.inv(path, cloneBytes(k), "key is not a node id")
			return nil
		}
		n := new(Node)
		if err := decodeValue(path, k, v, n); err != nil {
			c.fromErr(path, err)
			return nil
		}
		if n.ID != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record id %d does not match key", n.ID)
		}
		out[n.ID] = n
		return nil
	})
	roots := map[uint64]bool{}
	for _, g := range groups {
		for _, id := range g.Roots {
			roots[id] = true
			if n, ok := out[id]; !ok {
				c.inv(r.bpath(bGroups), u64key2(g.Step, g.ID), "root %d does not exist", id)
			} else if n.Parent != 0 || n.Group != g.ID {
				c.inv(r.bpath(bGroups), u64key2(g.Step, g.ID), "root %d is not a root of this group", id)
			}
		}
	}
	for id, n := range out {
		key := u64key(id)
		g, ok := groups[n.Group]
		switch {
		case !ok:
			c.inv(path, key, "group %d does not exist", n.Group)
		case g.Step != n.Step:
			c.inv(path, key, "step %d differs from its group's %d", n.Step, g.Step)
		case g.Status == GroupClosed && n.Status == NodeActive:
			c.inv(path, key, "active in closed group %d", n.Group)
		}
		if !n.Status.Valid() {
			c.inv(path, key, "unknown status %q", n.Status)
		}
		for _, s := range n.Scores {
			if !finite(s.Value) || s.Value < 0 || s.Value > 1 {
				c.inv(path, key, "score %v outside [0,1]", s.Value)
			}
		}
		if n.Parent == 0 {
			if n.Fork != 0 || n.Base != 0 || n.Depth != 0 {
				c.inv(path, key, "root with fork %d base %d depth %d", n.Fork, n.Base, n.Depth)
			}
			if !roots[id] {
				c.inv(path, key, "root branch not listed in group %d", n.Group)
			}
			continue
		}
		p, ok := out[n.Parent]
		switch {
		case !ok:
			c.inv(path, key, "parent %d does not exist", n.Parent)
		case n.Parent >= id:
			c.inv(path, key, "parent %d does not precede it (cycle?)", n.Parent)
		case n.Fork < 0 || n.Fork > p.Turns:
			c.inv(path, key, "fork point %d outside parent %d's %d turns", n.Fork, p.ID, p.Turns)
		case n.Depth != p.Depth+1 || n.Base != p.Base+n.Fork:
			c.inv(path, key, "depth %d / base %d inconsistent with parent %d", n.Depth, n.Base, p.ID)
		case p.Group != n.Group:
			c.inv(path, key, "parent %d is in another group", p.ID)
		}
	}
	return out
}

func (c *checker) turns(r *RunTx, nodes map[uint64]*Node) {
	path := r.bpath(bTurns)
	seen := map[uint64]int{}
	_ = r.sub[bTurns].ForEach(func(k, v []byte) error {
		if len(k) != 16 {
			c.inv(path, cloneBytes(k), "key is not node|index")
			return nil
		}
		id, idx := keyU64(k, 0), keyU64(k, 1)
		var t Turn
		if err := decodeTurn(path, k, v, &t); err != nil {
			c.fromErr(path, err)
		}
		n, ok := nodes[id]
		switch {
		case !ok:
			c.inv(path, cloneBytes(k), "turn of unknown node %d", id)
		case idx >= uint64(n.Turns):
			c.inv(path, cloneBytes(k), "turn %d past node %d's %d turns", idx, id, n.Turns)
		default:
			seen[id]++
		}
		return nil
	})
	for id, n := range nodes {
		if seen[id] != n.Turns {
			c.inv(r.bpath(bNodes), u64key(id), "node has %d turns stored, record says %d", seen[id], n.Turns)
		}
	}
}

func (c *checker) children(r *RunTx, nodes map[uint64]*Node) {
	path := r.bpath(bChildren)
	indexed := map[uint64]bool{}
	_ = r.sub[bChildren].ForEach(func(k, v []byte) error {
		if len(v) != 0 {
			c.add(Violation{Bucket: path, Key: cloneBytes(k), Kind: "corrupt", Detail: "index value is not empty"})
		}
		if len(k) != 16 {
			c.inv(path, cloneBytes(k), "key is not parent|child")
			return nil
		}
		p, ch := keyU64(k, 0), keyU64(k, 1)
		if n, ok := nodes[ch]; !ok || n.Parent != p {
			c.inv(path, cloneBytes(k), "index says %d is a child of %d; the node says otherwise", ch, p)
		}
		indexed[ch] = true
		return nil
	})
	for id, n := range nodes {
		if n.Parent != 0 && !indexed[id] {
			c.inv(r.bpath(bNodes), u64key(id), "missing from the children index of %d", n.Parent)
		}
	}
}

func (c *checker) frontier(r *RunTx, nodes map[uint64]*Node) {
	path := r.bpath(bFrontier)
	in := map[uint64]bool{}
	_ = r.sub[bFrontier].ForEach(func(k, v []byte) error {
		if len(v) != 0 {
			c.add(Violation{Bucket: path, Key: cloneBytes(k), Kind: "corrupt", Detail: "index value is not empty"})
		}
		if len(k) != 8 {
			c.inv(path, cloneBytes(k), "key is not a node id")
			return nil
		}
		id := keyU64(k, 0)
		in[id] = true
		if n, ok := nodes[id]; !ok {
			c.inv(path, cloneBytes(k), "frontier lists unknown node %d", id)
		} else if n.Status != NodeActive {
			c.inv(path, cloneBytes(k), "frontier lists node %d, which is %s", id, n.Status)
		}
		return nil
	})
	for id, n := range nodes {
		if n.Status == NodeActive && !in[id] {
			c.inv(r.bpath(bNodes), u64key(id), "active node missing from the frontier")
		}
	}
}

func (c *checker) advantages(r *RunTx, nodes map[uint64]*Node) {
	path := r.bpath(bAdv)
	_ = r.sub[bAdv].ForEach(func(k, v []byte) error {
		if len(k) != 24 {
			c.inv(path, cloneBytes(k), "key is not step|group|leaf")
			return nil
		}
		var a Advantage
		if err := decodeValue(path, k, v, &a); err != nil {
			c.fromErr(path, err)
			return nil
		}
		n, ok := nodes[a.Leaf]
		switch {
		case a.Step != keyU64(k, 0) || a.Group != keyU64(k, 1) || a.Leaf != keyU64(k, 2):
			c.inv(path, cloneBytes(k), "record does not match its key")
		case !ok:
			c.inv(path, cloneBytes(k), "leaf %d does not exist", a.Leaf)
		case n.Group != a.Group || !n.Status.Leaf():
			c.inv(path, cloneBytes(k), "node %d is not a leaf of group %d", a.Leaf, a.Group)
		}
		return nil
	})
}

func (c *checker) rubrics(r *RunTx) {
	path := r.bpath(bRubrics)
	pools := map[uint64]RubricPool{}
	merged := map[uint64]uint64{}
	_ = r.sub[bRubrics].ForEach(func(k, v []byte) error {
		var rb Rubric
		if err := decodeValue(path, k, v, &rb); err != nil {
			c.fromErr(path, err)
			return nil
		}
		if len(k) != 8 || rb.ID != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record does not match its key")
		}
		if !rb.Pool.Valid() {
			c.inv(path, cloneBytes(k), "unknown pool %q", rb.Pool)
		}
		pools[rb.ID] = rb.Pool
		if rb.Pool == PoolMerged {
			merged[rb.ID] = rb.MergedInto
		}
		return nil
	})
	for id, into := range merged {
		if p, ok := pools[into]; !ok || (p != PoolPublic && p != PoolRetired) {
			c.inv(path, u64key(id), "merged into %d, which is not a public or retired rubric", into)
		}
	}
}

func (c *checker) checkpoints(r *RunTx) {
	path := r.bpath(bCkpt)
	_ = r.sub[bCkpt].ForEach(func(k, v []byte) error {
		var ck Checkpoint
		if err := decodeValue(path, k, v, &ck); err != nil {
			c.fromErr(path, err)
		} else if len(k) != 8 || ck.Step != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record does not match its key")
		}
		return nil
	})
}

func (c *checker) events(r *RunTx) {
	path := r.bpath(bEvents)
	want := uint64(1)
	b := r.sub[bEvents]
	_ = b.ForEach(func(k, v []byte) error {
		var e Event
		if err := decodeValue(path, k, v, &e); err != nil {
			c.fromErr(path, err)
		} else if len(k) != 8 || e.Seq != keyU64(k, 0) {
			c.inv(path, cloneBytes(k), "record does not match its key")
		}
		if len(k) == 8 {
			if got := keyU64(k, 0); got != want {
				c.inv(path, cloneBytes(k), "sequence jumps from %d to %d", want-1, got)
			}
			want = keyU64(k, 0) + 1
		}
		return nil
	})
	if want-1 != b.Sequence() {
		c.inv(path, nil, "last event is %d but the sequence is at %d", want-1, b.Sequence())
	}
}
