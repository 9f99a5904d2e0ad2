package store

import (
	"github.com/patrdb/patrdb/model"
	bolt "go.etcd.io/bbolt"
)

// The checks of one record against what it links to. The whole-run check
// (check.go) calls them for every record as it walks the buckets; a
// narrow read (checkedrun.go) for the records it returns. Their lookups go
// through runCheck.get and has, which on a narrow read first check the
// pages the lookup follows.

// runCheck is what the checks of one run share. Memory stays bounded
// whatever the run's size: records are read one at a time through cursors
// and point lookups, a few recent groups and nodes are cached, and sets of
// ids are bitsets (one bit per id the sequence handed out).
type runCheck struct {
	r          *RunTx
	tally      *tallier
	groups     int // group records read
	groupIDs   *idSet
	roots      *idSet                  // every node some group lists as a root
	groupCache map[uint64]*groupInfo   // by id: the groups of recent nodes
	nodes      *[nodeSlots]*model.Node // recent nodes, by id modulo nodeSlots; read only
	lastStep   uint64                  // the run record's
	dropped    uint64                  // the run record's DroppedStep: steps up to it hold no records
	// narrow, when set, is a narrow read: the pages of each lookup are
	// checked before it, and a lookup whose pages are damaged finds nothing
	// (the narrow read reports the damage).
	narrow *CheckedRun
}

func newRunCheck(r *RunTx, lastStep uint64) *runCheck {
	return &runCheck{r: r, tally: newTallier(), groupIDs: newIDSet(r.subBucket(bGroups).Sequence()),
		roots: newIDSet(r.subBucket(bNodes).Sequence()), groupCache: map[uint64]*groupInfo{},
		nodes: new([nodeSlots]*model.Node), lastStep: lastStep}
}

// get returns the value under key in the run's sub-bucket name.
func (rc *runCheck) get(name string, key []byte) []byte {
	if rc.narrow != nil && !rc.narrow.reach(name, key, pointEnd(key)) {
		return nil
	}
	return rc.r.subBucket(name).Get(key)
}

// has reports whether the run's sub-bucket name holds key.
func (rc *runCheck) has(name string, key []byte) bool {
	if rc.narrow != nil && !rc.narrow.reach(name, key, pointEnd(key)) {
		return false
	}
	return hasKey(rc.r.subBucket(name), key)
}

// groupInfo is what the node checks need of a group.
type groupInfo struct {
	step   uint64
	status model.GroupStatus
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
	raw := rc.get(bGroups, u64key2(step, id))
	if raw == nil {
		return nil
	}
	var g model.Group
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

func newGroupInfo(g *model.Group) *groupInfo { return &groupInfo{step: g.Step, status: g.Status} }

// groupByID finds a group whose record says id, wherever it is stored: a
// scan of the groups, only for a node whose group is not under its own
// key; a narrow read asks the group index instead.
func (rc *runCheck) groupByID(id uint64) *groupInfo {
	if rc.narrow != nil {
		return rc.narrow.indexedGroup(rc, id)
	}
	var found *groupInfo
	_ = rc.r.subBucket(bGroups).ForEach(func(k, v []byte) error {
		var g model.Group
		if len(k) == 16 && decodeValue(rc.r.bpath(bGroups), k, v, &g) == nil && g.ID == id {
			found = newGroupInfo(&g)
			return errStop
		}
		return nil
	})
	return found
}

// nodeSlots is how many recent nodes a check keeps, each in the slot of
// its id modulo nodeSlots: a node is looked up again by its children in
// the nodes walk, which follow it closely in id order, and by the entries
// of the children index and the advantage records, which come in the
// order of their parents and groups. On a run of a million nodes, reading
// and decoding every lookup afresh cost a tenth of the whole-run check.
const nodeSlots = 1 << 12

// node reads a node record for a cross-check; nil when it is missing or
// does not decode (the nodes walk reports that). The record may be
// shared: callers only read it.
func (rc *runCheck) node(id uint64) *model.Node {
	if n := rc.nodes[id%nodeSlots]; n != nil && n.ID == id {
		return n
	}
	raw := rc.get(bNodes, u64key(id))
	if raw == nil {
		return nil
	}
	n := new(model.Node)
	if decodeValue(rc.r.bpath(bNodes), u64key(id), raw, n) != nil || n.ID != id {
		return nil
	}
	rc.nodes[id%nodeSlots] = n
	return n
}

// group checks one group record and returns it (nil when it does not
// decode).
func (c *checker) group(rc *runCheck, k, v []byte) *model.Group {
	path := rc.r.bpath(bGroups)
	var g model.Group
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
	if rc.dropped > 0 && g.Step <= rc.dropped {
		c.inv(path, u64key2(g.Step, g.ID), "group of step %d, which the run dropped (through step %d)", g.Step, rc.dropped)
	}
	// A checkpoint completes its step; an open group left behind has
	// active branches that no resume will ever continue.
	if g.Status == model.GroupOpen && g.Step <= rc.lastStep {
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
	return &g
}

// node checks one node record against its group, its parent, the
// children index and the frontier, and returns it (nil when it does not
// decode or is not the node its key says).
func (c *checker) node(rc *runCheck, k, v []byte) *model.Node {
	path := rc.r.bpath(bNodes)
	if len(k) != 8 {
		c.inv(path, cloneBytes(k), "key is not a node id")
		return nil
	}
	n := new(model.Node)
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
	rc.nodes[id%nodeSlots] = n
	g := rc.group(n.Step, n.Group)
	if g == nil {
		if g = rc.groupByID(n.Group); g != nil {
			c.inv(path, key, "step %d differs from its group's %d", n.Step, g.step)
		} else {
			c.inv(path, key, "group %d does not exist", n.Group)
		}
	}
	if g != nil && g.status == model.GroupClosed && n.Status == model.NodeActive {
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
	if n.Status == model.NodeActive && !rc.has(bFrontier, key) {
		c.inv(path, key, "active node missing from the frontier")
	}
	if n.Parent == 0 {
		if n.Fork != 0 || n.Base != 0 || n.Depth != 0 {
			c.inv(path, key, "root with fork %d base %d depth %d", n.Fork, n.Base, n.Depth)
		}
		if !rc.roots.has(id) {
			c.inv(path, key, "root branch not listed in group %d", n.Group)
		}
		return n
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
	case !rc.has(bChildren, u64key2(n.Parent, id)):
		// Only for a node whose parent checked sound: otherwise the
		// index entry under its true parent is the one that disagrees.
		c.inv(path, key, "missing from the children index of %d", n.Parent)
	}
	return n
}

// turn checks one stored turn: its key, its decoding, and that it lies
// within the turns of the node it names (owner: that node's record, nil
// when none). It returns the turn's sequence number (legacy: its index).
func (c *checker) turn(path string, k, v []byte, legacy bool, owner func(uint64) *model.Node) (at uint64, ok bool) {
	if len(k) != 16 {
		c.inv(path, cloneBytes(k), "key is not seq|node")
		return 0, false
	}
	id, at := keyU64(k, 1), keyU64(k, 0) // seq|node
	if legacy {
		id, at = at, id // node|index
	}
	// viewTurn makes decodeTurn's checks without copying the turn out: a
	// turn is most of a file's bytes.
	var t TurnView
	if err := viewTurn(path, k, v, &t); err != nil {
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
	return at, true
}

// nodeTurns checks that a node has exactly as many turns stored as its
// record says, where its record says they are.
func (c *checker) nodeTurns(rc *runCheck, k []byte, n *model.Node, legacy bool) {
	r := rc.r
	if !legacy && n.TurnRanges.Total() != n.Turns {
		c.inv(r.bpath(bNodes), cloneBytes(k), "turn ranges hold %d turns, record says %d", n.TurnRanges.Total(), n.Turns)
	}
	if rc.narrow != nil && !rc.narrow.reachTurns(n, legacy) {
		return
	}
	if seen := storedTurns(r.subBucket(bTurns), n, legacy); seen != n.Turns {
		c.inv(r.bpath(bNodes), cloneBytes(k), "node has %d turns stored, record says %d", seen, n.Turns)
	}
}

// childEntry checks one entry parent|child of the children index against
// the child's record.
func (c *checker) childEntry(rc *runCheck, k, v []byte) {
	path := rc.r.bpath(bChildren)
	if len(v) != 0 {
		c.add(Violation{Bucket: path, Key: cloneBytes(k), Kind: "corrupt", Detail: "index value is not empty"})
	}
	if len(k) != 16 {
		c.inv(path, cloneBytes(k), "key is not parent|child")
		return
	}
	p, ch := keyU64(k, 0), keyU64(k, 1)
	if n := rc.node(ch); n == nil || n.Parent != p {
		c.inv(path, cloneBytes(k), "index says %d is a child of %d; the node says otherwise", ch, p)
	}
}

// frontierEntry checks one entry of the frontier: an active node.
func (c *checker) frontierEntry(rc *runCheck, k, v []byte) {
	path := rc.r.bpath(bFrontier)
	if len(v) != 0 {
		c.add(Violation{Bucket: path, Key: cloneBytes(k), Kind: "corrupt", Detail: "index value is not empty"})
	}
	if len(k) != 8 {
		c.inv(path, cloneBytes(k), "key is not a node id")
		return
	}
	id := keyU64(k, 0)
	switch n := rc.node(id); {
	case n == nil:
		c.inv(path, cloneBytes(k), "frontier lists unknown node %d", id)
	case n.Status != model.NodeActive:
		c.inv(path, cloneBytes(k), "frontier lists node %d, which is %s", id, n.Status)
	}
}

// advantage checks one advantage record against its key and its leaf.
func (c *checker) advantage(rc *runCheck, k, v []byte) {
	path := rc.r.bpath(bAdv)
	if len(k) != 24 {
		c.inv(path, cloneBytes(k), "key is not step|group|leaf")
		return
	}
	var a model.Advantage
	if err := decodeValue(path, k, v, &a); err != nil {
		c.fromErr(path, err)
		return
	}
	if rc.tally.first(k) {
		rc.tally.adv(&a)
	}
	n := rc.node(a.Leaf)
	switch {
	case a.Step != keyU64(k, 0) || a.Group != keyU64(k, 1) || a.Leaf != keyU64(k, 2):
		c.inv(path, cloneBytes(k), "record does not match its key")
	case rc.dropped > 0 && a.Step <= rc.dropped:
		c.inv(path, cloneBytes(k), "advantage of step %d, which the run dropped (through step %d)", a.Step, rc.dropped)
	case n == nil:
		c.inv(path, cloneBytes(k), "leaf %d does not exist", a.Leaf)
	case n.Group != a.Group || !n.Status.Leaf():
		c.inv(path, cloneBytes(k), "node %d is not a leaf of group %d", a.Leaf, a.Group)
	}
}

// storedTurns counts the turns stored for n that its record accounts for:
// keys node|index below its count (legacy), or keys seq|node inside its
// turn ranges.
func storedTurns(turns *bolt.Bucket, n *model.Node, legacy bool) int {
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
