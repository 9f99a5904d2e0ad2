package store

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store/internal/pagewalk"
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
// (walked with bounds first, internal/pagewalk), every value's CRC and decoding,
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
func (db *DB) Check() (vs []Violation, err error) { return db.CheckWith(CheckOptions{}) }

// CheckWith is Check with options (progress reporting). Its memory stays
// bounded whatever the file's size: records are read one at a time, and
// what the check remembers across them is a bit per id.
func (db *DB) CheckWith(o CheckOptions) (vs []Violation, err error) {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	err = db.View(func(tx *Tx) error {
		vs = tx.runCheck(true, o)
		return nil
	})
	return vs, err
}

// Check runs the integrity check inside an existing transaction. In a
// read-only transaction of a writable DB, the free-page accounting and the
// meta-page comparison need the snapshot to be the latest commit and no
// write in progress; otherwise they are skipped (DB.Check waits instead).
func (tx *Tx) Check() []Violation { return tx.CheckWith(CheckOptions{}) }

// CheckWith is Tx.Check with options (progress reporting).
func (tx *Tx) CheckWith(o CheckOptions) []Violation {
	if tx.Writable() || tx.db.opts.ReadOnly {
		return tx.runCheck(true, o)
	}
	if !tx.db.writeMu.TryLock() {
		return tx.runCheck(false, o)
	}
	defer tx.db.writeMu.Unlock()
	return tx.runCheck(tx.snapshot == tx.db.cache.latest(), o)
}

// runCheck runs the checks; quiet says no commit has happened since the
// snapshot and none can start, so bbolt's page accounting and the meta
// pages describe it.
func (tx *Tx) runCheck(quiet bool, o CheckOptions) (vs []Violation) {
	c := &checker{tx: tx, opts: o}
	if tx.Writable() {
		if err := tx.flush(); err != nil {
			c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: err.Error()})
			return c.vs
		}
	}
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

// pages walks the snapshot's pages from the file with bounds (internal/pagewalk)
// before bbolt's check or a cursor trusts them, and reports whether the
// b-trees are sound; if not, the rest of the check would loop or crash on
// them and is skipped. A damaged meta page is reported too when quiet. A
// write transaction's pages are not on disk yet: it relies on bbolt alone.
func (c *checker) pages(quiet bool) bool {
	tx := c.tx
	if tx.Writable() {
		return true
	}
	if c.opts.Progress != nil {
		c.opts.Progress(CheckProgress{Phase: "pages"})
	}
	var metas []string
	pages := []string{"the page walk did not finish"}
	c.guard("(file)", func() {
		metas, pages = pagewalk.File(tx.db.path, tx.btx.DB().Info().PageSize, uint64(tx.btx.ID()),
			uint64(tx.btx.Cursor().Bucket().Root()), nil, quiet)
	})
	for _, p := range append(metas, pages...) {
		c.add(Violation{Bucket: "(file)", Kind: "structure", Detail: p})
	}
	return len(pages) == 0
}

type checker struct {
	tx   *Tx
	vs   []Violation
	opts CheckOptions
	// the progress being counted (checkprogress.go)
	runID, phase string
	done         int64
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
	if v := m.Get(metaFormat); len(v) != 8 || (keyU64(v, 0) != c.tx.db.format) {
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
	rc := &runCheck{r: r, tally: newTallier(), groupIDs: newIDSet(r.sub[bGroups].Sequence()),
		roots: newIDSet(r.sub[bNodes].Sequence()), groupCache: map[uint64]*groupInfo{}}
	c.groups(rc, info.LastStep)
	c.nodes(rc)
	c.turns(r)
	c.children(r)
	c.frontier(r)
	c.advantages(rc)
	c.rubrics(r)
	c.checkpoints(r)
	c.events(r)
	c.logMatches(r)
	c.ids(r, bGroups, 1)
	c.ids(r, bNodes, 0)
	c.ids(r, bRubrics, 0)
	c.counters(rc, len(c.vs) == clean)
}

// runCheck is what the checks of one run share. Memory stays bounded
// whatever the run's size: records are read one at a time through cursors
// and point lookups, a few recent groups are cached, and sets of ids are
// bitsets (one bit per id the sequence handed out).
type runCheck struct {
	r          *RunTx
	tally      *tallier
	groups     int // group records read
	groupIDs   *idSet
	roots      *idSet                // every node some group lists as a root
	groupCache map[uint64]*groupInfo // by id: the groups of recent nodes
}

// groupInfo is what the node checks need of a group.
type groupInfo struct {
	step   uint64
	status GroupStatus
}

// maxGroupCache bounds runCheck.groupCache; nodes come in id order, which
// follows their groups closely, so a few hundred entries hit nearly always.
const maxGroupCache = 512

// group returns the group a node names by (step, id), or nil when no group
// has that key.
func (rc *runCheck) group(step, id uint64) *groupInfo {
	if g := rc.groupCache[id]; g != nil && g.step == step {
		return g
	}
	raw := rc.r.sub[bGroups].Get(u64key2(step, id))
	if raw == nil {
		return nil
	}
	var g Group
	if decodeValue(rc.r.bpath(bGroups), u64key2(step, id), raw, &g) != nil || g.ID != id || g.Step != step {
		return nil // reported by the groups walk
	}
	gi := newGroupInfo(&g)
	if len(rc.groupCache) >= maxGroupCache {
		clear(rc.groupCache)
	}
	rc.groupCache[id] = gi
	return gi
}

func newGroupInfo(g *Group) *groupInfo { return &groupInfo{step: g.Step, status: g.Status} }

// groupByID finds a group whose record says id, wherever it is stored
// (a scan: only for a node whose group is not under its own key).
func (rc *runCheck) groupByID(id uint64) *groupInfo {
	var found *groupInfo
	_ = rc.r.sub[bGroups].ForEach(func(k, v []byte) error {
		var g Group
		if len(k) == 16 && decodeValue(rc.r.bpath(bGroups), k, v, &g) == nil && g.ID == id {
			found = newGroupInfo(&g)
			return errStop
		}
		return nil
	})
	return found
}

// node reads a node record for a cross-check; nil when it is missing or
// does not decode (the nodes walk reports that).
func (rc *runCheck) node(id uint64) *Node {
	raw := rc.r.sub[bNodes].Get(u64key(id))
	if raw == nil {
		return nil
	}
	n := new(Node)
	if decodeValue(rc.r.bpath(bNodes), u64key(id), raw, n) != nil || n.ID != id {
		return nil
	}
	return n
}

func (c *checker) groups(rc *runCheck, lastStep uint64) {
	r := rc.r
	path := r.bpath(bGroups)
	_ = r.sub[bGroups].ForEach(func(k, v []byte) error {
		c.progress(r, "groups", 1)
		var g Group
		if len(k) != 16 {
			c.inv(path, cloneBytes(k), "key is not step|group")
			return nil
		}
		if err := decodeValue(path, k, v, &g); err != nil {
			c.fromErr(path, err)
			return nil
		}
		if g.Step != keyU64(k, 0) || g.ID != keyU64(k, 1) {
			c.inv(path, cloneBytes(k), "record says step %d group %d", g.Step, g.ID)
		}
		if rc.groupIDs.has(g.ID) {
			c.inv(path, cloneBytes(k), "group id %d appears twice", g.ID)
		}
		rc.groupIDs.add(g.ID)
		rc.groups++
		rc.tally.group(&g)
		// A checkpoint completes its step; an open group left behind has
		// active branches that no resume will ever continue.
		if g.Status == GroupOpen && g.Step <= lastStep {
			c.inv(path, u64key2(g.Step, g.ID), "open group in completed step %d: its active branches are orphaned", g.Step)
		}
		for _, id := range g.Roots {
			rc.roots.add(id)
			if n := rc.node(id); n == nil {
				c.inv(path, u64key2(g.Step, g.ID), "root %d does not exist", id)
			} else if n.Parent != 0 || n.Group != g.ID {
				c.inv(path, u64key2(g.Step, g.ID), "root %d is not a root of this group", id)
			}
		}
		return nil
	})
}

func (c *checker) nodes(rc *runCheck) {
	r := rc.r
	path := r.bpath(bNodes)
	children, frontier := r.sub[bChildren], r.sub[bFrontier]
	_ = r.sub[bNodes].ForEach(func(k, v []byte) error {
		c.progress(r, "nodes", 1)
		if len(k) != 8 {
			c.inv(path, cloneBytes(k), "key is not a node id")
			return nil
		}
		n := new(Node)
		if err := decodeValue(path, k, v, n); err != nil {
			c.fromErr(path, err)
			return nil
		}
		id := keyU64(k, 0)
		key := u64key(id)
		if n.ID != id {
			// Which record is this? Its links speak for another node.
			c.inv(path, cloneBytes(k), "record id %d does not match key", n.ID)
			return nil
		}
		rc.tally.node(n)
		g := rc.group(n.Step, n.Group)
		if g == nil {
			if g = rc.groupByID(n.Group); g != nil {
				c.inv(path, key, "step %d differs from its group's %d", n.Step, g.step)
			} else {
				c.inv(path, key, "group %d does not exist", n.Group)
			}
		}
		if g != nil && g.status == GroupClosed && n.Status == NodeActive {
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
		if n.Status == NodeActive && !hasKey(frontier, key) {
			c.inv(path, key, "active node missing from the frontier")
		}
		if n.Parent == 0 {
			if n.Fork != 0 || n.Base != 0 || n.Depth != 0 {
				c.inv(path, key, "root with fork %d base %d depth %d", n.Fork, n.Base, n.Depth)
			}
			if !rc.roots.has(id) {
				c.inv(path, key, "root branch not listed in group %d", n.Group)
			}
			return nil
		}
		p := rc.node(n.Parent)
		switch {
		case p == nil:
			c.inv(path, key, "parent %d does not exist", n.Parent)
		case n.Parent >= id:
			c.inv(path, key, "parent %d does not precede it (cycle?)", n.Parent)
		case n.Fork < 0 || n.Fork > p.Turns:
			c.inv(path, key, "fork point %d outside parent %d's %d turns", n.Fork, p.ID, p.Turns)
		case n.Depth != p.Depth+1 || n.Base != p.Base+n.Fork:
			c.inv(path, key, "depth %d / base %d inconsistent with parent %d", n.Depth, n.Base, p.ID)
		case p.Group != n.Group:
			c.inv(path, key, "parent %d is in another group", p.ID)
		case !hasKey(children, u64key2(n.Parent, id)):
			// Only for a node whose parent checked sound: otherwise the
			// index entry under its true parent is the one that disagrees.
			c.inv(path, key, "missing from the children index of %d", n.Parent)
		}
		return nil
	})
}

// turns checks the turns bucket against the node records: every turn
// decodes and belongs to a node whose turns include it (its turn ranges;
// in a file of format 2 or older, keyed node|index, its turn count), and
// each node has exactly as many turns stored as its record says. Memory
// stays bounded: the turns are walked in key order with a few hundred
// recent nodes cached, then the nodes in key order, each counting its own
// turns by seeking to them.
func (c *checker) turns(r *RunTx) {
	path := r.bpath(bTurns)
	legacy := r.legacyTurns()
	turns := r.sub[bTurns]
	recent := map[uint64]*Node{}
	owner := func(id uint64) *Node {
		if n, ok := recent[id]; ok {
			return n
		}
		var n *Node
		raw := r.sub[bNodes].Get(u64key(id))
		if raw != nil {
			n = new(Node)
			if decodeValue(r.bpath(bNodes), u64key(id), raw, n) != nil || n.ID != id {
				n = nil // reported by the nodes walk
			}
		}
		if len(recent) >= maxGroupCache {
			clear(recent)
		}
		recent[id] = n
		return n
	}
	var top uint64
	_ = turns.ForEach(func(k, v []byte) error {
		c.progress(r, "turns", 1)
		if len(k) != 16 {
			c.inv(path, cloneBytes(k), "key is not seq|node")
			return nil
		}
		id, at := keyU64(k, 1), keyU64(k, 0) // seq|node
		if legacy {
			id, at = at, id // node|index
		}
		top = max(top, at)
		var t Turn
		if err := decodeTurn(path, k, v, &t); err != nil {
			c.fromErr(path, err)
		}
		n := owner(id)
		switch {
		case n == nil:
			c.inv(path, cloneBytes(k), "turn of unknown node %d", id)
		case legacy && at >= uint64(n.Turns):
			c.inv(path, cloneBytes(k), "turn %d past node %d's %d turns", at, id, n.Turns)
		case !legacy && !inRanges(n.TurnRanges, at):
			c.inv(path, cloneBytes(k), "turn %d is outside node %d's turn ranges", at, id)
		}
		return nil
	})
	_ = r.sub[bNodes].ForEach(func(k, v []byte) error {
		var n Node
		if len(k) != 8 || decodeValue(r.bpath(bNodes), k, v, &n) != nil || n.ID != keyU64(k, 0) {
			return nil // reported by the nodes walk
		}
		if !legacy && n.TurnRanges.total() != n.Turns {
			c.inv(r.bpath(bNodes), cloneBytes(k), "turn ranges hold %d turns, record says %d", n.TurnRanges.total(), n.Turns)
		}
		if seen := storedTurns(turns, &n, legacy); seen != n.Turns {
			c.inv(r.bpath(bNodes), cloneBytes(k), "node has %d turns stored, record says %d", seen, n.Turns)
		}
		return nil
	})
	if !legacy && top > turns.Sequence() {
		c.inv(path, nil, "sequence %d is below turn %d: new turns would overwrite old ones", turns.Sequence(), top)
	}
}

// storedTurns counts the turns stored for n that its record accounts for:
// keys node|index below its count (legacy), or keys seq|node inside its
// turn ranges.
func storedTurns(turns *bolt.Bucket, n *Node, legacy bool) int {
	cur := turns.Cursor()
	seen := 0
	if legacy {
		for k, _ := cur.Seek(u64key(n.ID)); k != nil && len(k) == 16 && keyU64(k, 0) == n.ID; k, _ = cur.Next() {
			if keyU64(k, 1) < uint64(n.Turns) {
				seen++
			}
		}
		return seen
	}
	for _, rg := range n.TurnRanges {
		end := rg.Seq + uint64(rg.Count)
		for k, _ := cur.Seek(u64key(rg.Seq)); k != nil && len(k) >= 8 && keyU64(k, 0) < end; k, _ = cur.Next() {
			if len(k) == 16 && keyU64(k, 1) == n.ID {
				seen++
			}
		}
	}
	return seen
}

// inRanges reports whether seq lies in one of rs (which ascend).
func inRanges(rs TurnRanges, seq uint64) bool {
	lo, hi := 0, len(rs)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case seq < rs[m].Seq:
			hi = m
		case seq >= rs[m].Seq+uint64(rs[m].Count):
			lo = m + 1
		default:
			return true
		}
	}
	return false
}

func (c *checker) children(r *RunTx) {
	path := r.bpath(bChildren)
	nodes := r.sub[bNodes]
	_ = r.sub[bChildren].ForEach(func(k, v []byte) error {
		c.progress(r, "children", 1)
		if len(v) != 0 {
			c.add(Violation{Bucket: path, Key: cloneBytes(k), Kind: "corrupt", Detail: "index value is not empty"})
		}
		if len(k) != 16 {
			c.inv(path, cloneBytes(k), "key is not parent|child")
			return nil
		}
		p, ch := keyU64(k, 0), keyU64(k, 1)
		raw := nodes.Get(u64key(ch))
		var n Node
		if raw == nil || decodeValue(r.bpath(bNodes), u64key(ch), raw, &n) != nil || n.Parent != p {
			c.inv(path, cloneBytes(k), "index says %d is a child of %d; the node says otherwise", ch, p)
		}
		return nil
	})
}

func (c *checker) frontier(r *RunTx) {
	path := r.bpath(bFrontier)
	nodes := r.sub[bNodes]
	_ = r.sub[bFrontier].ForEach(func(k, v []byte) error {
		if len(v) != 0 {
			c.add(Violation{Bucket: path, Key: cloneBytes(k), Kind: "corrupt", Detail: "index value is not empty"})
		}
		if len(k) != 8 {
			c.inv(path, cloneBytes(k), "key is not a node id")
			return nil
		}
		id := keyU64(k, 0)
		raw := nodes.Get(k)
		var n Node
		switch {
		case raw == nil:
			c.inv(path, cloneBytes(k), "frontier lists unknown node %d", id)
		case decodeValue(r.bpath(bNodes), k, raw, &n) != nil || n.ID != id:
			c.inv(path, cloneBytes(k), "frontier lists unknown node %d", id)
		case n.Status != NodeActive:
			c.inv(path, cloneBytes(k), "frontier lists node %d, which is %s", id, n.Status)
		}
		return nil
	})
}

func (c *checker) advantages(rc *runCheck) {
	r := rc.r
	path := r.bpath(bAdv)
	_ = r.sub[bAdv].ForEach(func(k, v []byte) error {
		c.progress(r, "advantages", 1)
		if len(k) != 24 {
			c.inv(path, cloneBytes(k), "key is not step|group|leaf")
			return nil
		}
		var a Advantage
		if err := decodeValue(path, k, v, &a); err != nil {
			c.fromErr(path, err)
			return nil
		}
		if rc.tally.first(k) {
			rc.tally.adv(&a)
		}
		n := rc.node(a.Leaf)
		switch {
		case a.Step != keyU64(k, 0) || a.Group != keyU64(k, 1) || a.Leaf != keyU64(k, 2):
			c.inv(path, cloneBytes(k), "record does not match its key")
		case n == nil:
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
		c.progress(r, "events", 1)
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

// hasKey reports whether b holds key (index buckets store empty values,
// which Get does not tell from a missing key).
func hasKey(b *bolt.Bucket, key []byte) bool {
	k, _ := b.Cursor().Seek(key)
	return bytes.Equal(k, key)
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
