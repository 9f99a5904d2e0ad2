package store

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/patrdb/patrdb/model"
)

// NodeSpec describes a node to add. Parent 0 adds a root branch of the
// group; otherwise the child inherits Fork of the parent's own turns.
type NodeSpec struct {
	Step     uint64
	Group    uint64
	Parent   uint64
	Fork     int
	Ordinal  int // position among siblings; (group, parent, ordinal) is unique
	EnvState []byte
	Worker   string
	Attempt  int
}

// AddNode validates spec and adds an active node with an id from the run's
// node sequence. The parent must exist in the same group, be active or
// expanded, and have at least Fork own turns.
func (r *RunTx) AddNode(spec NodeSpec) (model.Node, error) {
	if err := r.tx.check(true); err != nil {
		return model.Node{}, err
	}
	n, err := r.addNode(spec)
	return n, r.tx.fail(err)
}

func (r *RunTx) addNode(spec NodeSpec) (model.Node, error) {
	g, err := r.groupRef(spec.Step, spec.Group)
	if err != nil {
		return model.Node{}, err
	}
	if g.Status != model.GroupOpen {
		return model.Node{}, invalidf("group %d is %s", g.ID, g.Status)
	}
	if spec.Ordinal < 0 || spec.Attempt < 0 {
		return model.Node{}, invalidf("node ordinal %d / attempt %d is negative", spec.Ordinal, spec.Attempt)
	}
	if err := validText(nil, "worker", spec.Worker); err != nil {
		return model.Node{}, err
	}
	d := &dirtyNode{r: r, node: model.Node{Step: g.Step, Group: g.ID, Parent: spec.Parent, Fork: spec.Fork, Ordinal: spec.Ordinal,
		Status: model.NodeActive, EnvState: cloneBytes(spec.EnvState), Worker: spec.Worker, Attempt: spec.Attempt}}
	n := &d.node
	d.n = n
	var siblings []uint64
	if spec.Parent == 0 {
		if spec.Fork != 0 {
			return model.Node{}, invalidf("root branch with fork point %d", spec.Fork)
		}
		siblings = g.Roots
	} else {
		p, err := r.nodeRef(spec.Parent)
		if err != nil {
			return model.Node{}, err
		}
		if p.Group != g.ID || p.Step != g.Step {
			return model.Node{}, invalidf("parent %d belongs to group %d, not %d", p.ID, p.Group, g.ID)
		}
		if p.Status != model.NodeActive && p.Status != model.NodeExpanded {
			return model.Node{}, invalidf("parent %d is %s and cannot have children", p.ID, p.Status)
		}
		if spec.Fork < 0 || spec.Fork > p.Turns {
			return model.Node{}, invalidf("fork point %d outside parent %d's %d turns", spec.Fork, p.ID, p.Turns)
		}
		n.Base = p.Base + spec.Fork
		n.Depth = p.Depth + 1
		if siblings, err = r.children(p.ID); err != nil {
			return model.Node{}, err
		}
	}
	for _, s := range siblings {
		sn, err := r.nodeRef(s)
		if err != nil {
			return model.Node{}, err
		}
		if sn.Ordinal == spec.Ordinal {
			return cloneNode(sn), existsf("node %d is already ordinal %d under parent %d of group %d", sn.ID, spec.Ordinal, spec.Parent, g.ID)
		}
	}
	nodes, err := r.bucket(bNodes)
	if err != nil {
		return model.Node{}, err
	}
	if r.firstNew == 0 {
		r.firstNew = nodes.Sequence() + 1
	}
	if n.ID, err = nodes.NextSequence(); err != nil {
		return model.Node{}, err
	}
	if spec.Parent == 0 {
		// A new version of the group, sharing what does not change:
		// no group's slices or map are changed in place (setGroup).
		ng := *g
		ng.Roots = append(slices.Clip(g.Roots), n.ID)
		if err := r.putGroup(&ng, ng.Status, ""); err != nil {
			return model.Node{}, err
		}
	} else {
		children, err := r.bucket(bChildren)
		if err != nil {
			return model.Node{}, err
		}
		if err := children.Put(r.tx.putKey(spec.Parent, n.ID), []byte{}); err != nil {
			return model.Node{}, err
		}
		// The transaction owns its kids lists (Children hands out
		// copies), and a list only grows: appending in place leaves
		// every shorter view of it as it was.
		if len(siblings) == cap(siblings) {
			siblings = slices.Grow(siblings, max(len(siblings), 4)) // once for a parent's first few children
		}
		r.kids[spec.Parent] = append(siblings, n.ID)
	}
	if err := r.putNode(d, nil, model.EvNodeAdd); err != nil {
		return model.Node{}, err
	}
	if n.ID-r.firstNew == uint64(len(r.fresh)) { // ids come from the sequence one after another
		if r.fresh == nil {
			r.fresh = make([]*dirtyNode, 0, r.tx.db.sizes.dirty) // as many as the last transaction changed
		}
		r.fresh = append(r.fresh, d)
	}
	return cloneNode(n), nil // n itself is the transaction's until the commit, then the cache's
}

// putNode is the one way a node record changes: prev is the node before
// the mutation (nil for a new node), d.n after it, made by this
// transaction (addNode, or editable: changed later only through
// editable). d joins the transaction's dirty set if it is not there yet;
// the set's records are written once each, just before commit (Tx.flush,
// through writeNode); the frontier is kept equal to the active nodes, and
// kind is logged with the record as its payload.
func (r *RunTx) putNode(d *dirtyNode, prev *model.Node, kind model.EventKind) error {
	n := d.n
	if prev == nil || !sameCounted(prev, n) {
		var d delta
		nodeDelta(&d, prev, n)
		if err := r.tally(&d); err != nil {
			return err
		}
	}
	if wasActive := prev != nil && prev.Status == model.NodeActive; wasActive != (n.Status == model.NodeActive) {
		r.queueFrontier(d)
	}
	if !d.listed {
		d.listed = true
		r.dirty[n.ID] = d
		r.listed = append(r.listed, d)
	}
	d.written, d.rec = false, nil
	if kind == "" {
		return nil
	}
	// The event carries the record's payload; the record itself is
	// written once, at flush, however often the node changes before, and
	// copied from the event when the event was its last change.
	size := 0
	val, err := r.putEvent(&model.Event{Kind: kind, Step: n.Step, Group: n.Group, Node: n.ID}, nodeMsgpSizeHint(n),
		func(b []byte) []byte {
			at := len(b)
			b = appendNodeMsgp(b, n)
			size = len(b) - at
			return b
		})
	if err != nil {
		return err
	}
	d.rec = val[len(val)-size:]
	return nil
}

// dirtyNode is a node record changed in this transaction and not yet
// written.
type dirtyNode struct {
	r       *RunTx
	n       *model.Node
	written bool
	listed  bool // in the run's dirty set (putNode)
	// inFrontier: the frontier bucket holds n's key, as the file was
	// before the transaction or as putFrontier left it; frontierQueued:
	// n is in the run's frontier queue (queueFrontier).
	inFrontier, frontierQueued bool
	// ownsRanges: n.TurnRanges was made by this transaction, shared with
	// no other version of the node, and is extended in place (putTurns);
	// ranges holds it while it fits, so that a node's first turns in a
	// transaction allocate nothing for it.
	ownsRanges bool
	ranges     [4]model.TurnRange
	// rec is n's record (its msgpack payload) as the event of its last
	// change holds it, in that event's value; nil when that change wrote
	// no event.
	rec []byte
	// node is n when the transaction made it (addNode, editable): the
	// entry and the node are one allocation, a step makes hundreds. Once
	// committed, n lives on in the node cache, and with it this entry:
	// endCommit drops r and rec, so that it keeps nothing of the
	// transaction alive.
	node model.Node
}

// flush puts the queued turns and events and makes the queued frontier
// changes (txqueue.go), then writes the dirty nodes' records in key order
// (bbolt inserts into a page's sorted elements, so new nodes in order
// append). Update calls it before commit, and a write transaction's Check
// before it reads the buckets.
func (tx *Tx) flush() error {
	for _, r := range tx.runs {
		if err := r.putQueued(""); err != nil {
			return err
		}
		if err := r.putFrontier(); err != nil {
			return tx.fail(err)
		}
	}
	for _, r := range tx.runsInOrder() {
		if err := r.writeDirty(); err != nil {
			return tx.fail(err)
		}
	}
	for _, r := range tx.runs {
		if err := r.flushGroups(); err != nil {
			return tx.fail(err)
		}
	}
	return tx.flushCounts()
}

// writeDirty writes the records of the run's dirty nodes not written yet,
// in id order. The nodes the transaction added were listed as they were
// added, in id order, after every node it did not add: only the others,
// the nodes of earlier transactions it changed, need sorting, by id alone
// (a sort of the whole set by run and id took 5% of a tiny step's own
// instructions).
func (r *RunTx) writeDirty() error {
	old, added := r.listed, r.listed[len(r.listed):]
	if r.firstNew != 0 {
		// Stably, the nodes of earlier transactions first.
		rest, at := r.flushTodo[:0], 0
		for _, d := range r.listed {
			if d.n.ID < r.firstNew {
				r.listed[at] = d
				at++
			} else {
				rest = append(rest, d)
			}
		}
		copy(r.listed[at:], rest)
		clear(rest)
		r.flushTodo = rest[:0]
		old, added = r.listed[:at], r.listed[at:]
	}
	byID := func(a, b *dirtyNode) int { return cmp.Compare(a.n.ID, b.n.ID) }
	slices.SortFunc(old, byID)
	if !slices.IsSortedFunc(added, byID) {
		slices.SortFunc(added, byID)
	}
	for _, d := range r.listed {
		if d.written {
			continue
		}
		if err := r.writeNode(d.n, d.rec); err != nil {
			return err
		}
		d.written = true
	}
	return nil
}

// runsInOrder are the transaction's run handles in id order.
func (tx *Tx) runsInOrder() []*RunTx {
	if len(tx.runs) == 1 {
		for _, r := range tx.runs {
			return []*RunTx{r}
		}
	}
	rs := slices.Collect(maps.Values(tx.runs))
	slices.SortFunc(rs, func(a, b *RunTx) int { return strings.Compare(a.id, b.id) })
	return rs
}

// writeNode puts a node's record into the nodes bucket (rec: its
// payload, when already encoded): every node record written goes through
// here.
func (r *RunTx) writeNode(n *model.Node, rec []byte) error {
	nodes, err := r.bucket(bNodes)
	if err != nil {
		return err
	}
	var val []byte
	if rec != nil {
		val = r.tx.value(len(rec), func(b []byte) []byte { return append(b, rec...) })
	} else {
		val = r.tx.value(nodeMsgpSizeHint(n), func(b []byte) []byte { return appendNodeMsgp(b, n) })
	}
	return r.tx.put(nodes, r.tx.putKey1(n.ID), val)
}

// Node returns a node's record, through the LRU when possible.
func (r *RunTx) Node(id uint64) (model.Node, error) {
	if r.checking() {
		return r.chk.Node(id)
	}
	p, err := r.nodeRef(id)
	if err != nil {
		return model.Node{}, err
	}
	return cloneNode(p), nil
}

// nodeRef returns a shared, read-only node: from the cache, or decoded and
// offered to it. Callers inside the package must not mutate it. In a write
// transaction it may be the transaction's own version of the node, which
// its next change makes in place (editable): do not keep it across a
// change to the same node.
func (r *RunTx) nodeRef(id uint64) (*model.Node, error) {
	if d := r.dirtyEntry(id); d != nil {
		return d.n, nil
	}
	return r.storedNode(id)
}

// dirtyEntry is node id's entry in the transaction's dirty set, nil when
// it has none. A node the transaction added is found by its place among
// them (fresh), without hashing: a step's calls are mostly about the
// nodes it adds.
func (r *RunTx) dirtyEntry(id uint64) *dirtyNode {
	if i := id - r.firstNew; r.firstNew != 0 && id >= r.firstNew && i < uint64(len(r.fresh)) {
		return r.fresh[i]
	}
	return r.dirty[id]
}

// nodeRefDirty is nodeRef with the node's entry in the transaction's
// dirty set (nil when it has none), for a caller about to change it
// (editable): one lookup in the set, not two.
func (r *RunTx) nodeRefDirty(id uint64) (*model.Node, *dirtyNode, error) {
	if d := r.dirtyEntry(id); d != nil {
		return d.n, d, nil
	}
	n, err := r.storedNode(id)
	return n, nil, err
}

// storedNode is nodeRef of a node the transaction has not changed: the
// cache's, or decoded and offered to it.
func (r *RunTx) storedNode(id uint64) (*model.Node, error) {
	if n, ok := r.tx.db.cache.get(r.cacheTag, id, r.tx.snapshot); ok {
		return n, nil
	}
	nodes, err := r.bucket(bNodes)
	if err != nil {
		return nil, err
	}
	key := u64key(id)
	raw := nodes.Get(key)
	if raw == nil {
		return nil, notFoundf("node %d of run %q", id, r.id)
	}
	n := new(model.Node)
	if err := decodeValue(r.bpath(bNodes), key, raw, n); err != nil {
		return nil, err
	}
	if n.ID != id {
		return nil, &CorruptError{Bucket: r.bpath(bNodes), Key: key, Reason: "record id does not match its key"}
	}
	r.tx.db.cache.put(r.cacheTag, id, r.tx.snapshot, n)
	return n, nil
}

// editNode is a copy of n to change and put back (putNode) without copying
// what does not change: its slices are n's, clipped, so that appending to
// one copies it. An element must not be changed in place (replaced does
// it on a copy): n may be the cache's, read by other transactions.
func editNode(n *model.Node) model.Node {
	c := *n
	c.Scores = slices.Clip(c.Scores)
	c.Decisions = slices.Clip(c.Decisions)
	c.EnvState = slices.Clip(c.EnvState)
	c.TurnRanges = slices.Clip(c.TurnRanges)
	return c
}

// replaced is a copy of xs with element i set to x.
func replaced[T any](xs []T, i int, x T) []T {
	out := slices.Clone(xs)
	out[i] = x
	return out
}

// cloneNode is a deep copy of n.
func cloneNode(n *model.Node) model.Node {
	c := *n
	c.Scores = append([]model.Score(nil), n.Scores...)
	c.Decisions = append([]model.Decision(nil), n.Decisions...)
	c.EnvState = cloneBytes(n.EnvState)
	c.TurnRanges = append(model.TurnRanges(nil), n.TurnRanges...)
	return c
}

// Children returns the ids of a node's children in id order.
func (r *RunTx) Children(id uint64) ([]uint64, error) {
	if r.checking() {
		return r.chk.Children(id)
	}
	kids, err := r.children(id)
	if r.kids == nil {
		return kids, err // a read transaction's, read just now
	}
	return slices.Clone(kids), err
}

// children is Children, shared: not to be changed. A write transaction
// reads a node's children from the index once, and knows those of the
// nodes it adds without reading: AddNode checks a parent's children, and
// CloseGroup walks the group through them, mostly nodes of the same step.
func (r *RunTx) children(id uint64) ([]uint64, error) {
	if kids, ok := r.kids[id]; ok {
		return kids, nil
	}
	if r.firstNew != 0 && id >= r.firstNew {
		return nil, nil // added by this transaction, and given no children yet
	}
	b, err := r.bucket(bChildren)
	if err != nil {
		return nil, err
	}
	var out []uint64
	prefix := u64key(id)
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && len(k) == 16 && keyU64(k, 0) == id; k, _ = c.Next() {
		out = append(out, keyU64(k, 1))
	}
	if r.kids != nil {
		r.kids[id] = out
	}
	return out, nil
}

// Frontier returns the ids of the run's active nodes in id order.
func (r *RunTx) Frontier() ([]uint64, error) {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return nil, err
		}
		return p.Frontier()
	}
	b, err := r.bucket(bFrontier)
	if err != nil {
		return nil, err
	}
	var out []uint64
	err = b.ForEach(func(k, _ []byte) error {
		if len(k) != 8 {
			return &CorruptError{Bucket: r.bpath(bFrontier), Key: cloneBytes(k), Reason: "frontier key is not 8 bytes"}
		}
		out = append(out, keyU64(k, 0))
		return nil
	})
	return out, err
}

// FrontierFrom calls fn with the ids of the active nodes from id from on,
// in id order, until fn returns false: a walk that stops early costs what
// it reads, whatever the frontier's width (a lease grant asking for a few
// branches of a step with thousands).
func (r *RunTx) FrontierFrom(from uint64, fn func(id uint64) bool) error {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return err
		}
		return p.FrontierFrom(from, fn)
	}
	b, err := r.bucket(bFrontier)
	if err != nil {
		return err
	}
	c := b.Cursor()
	for k, _ := c.Seek(u64key(from)); k != nil; k, _ = c.Next() {
		if len(k) != 8 {
			return &CorruptError{Bucket: r.bpath(bFrontier), Key: cloneBytes(k), Reason: "frontier key is not 8 bytes"}
		}
		if !fn(keyU64(k, 0)) {
			return nil
		}
	}
	return nil
}

// FrontierNodes returns the active nodes' records.
func (r *RunTx) FrontierNodes() ([]model.Node, error) {
	if r.checking() {
		return r.chk.FrontierNodes()
	}
	ids, err := r.Frontier()
	if err != nil {
		return nil, err
	}
	out := make([]model.Node, 0, len(ids))
	for _, id := range ids {
		n, err := r.Node(id)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// mutateNode loads a node, applies fn to it (editable: fn replaces
// slices, never changes their elements) and writes it back with one event.
func (r *RunTx) mutateNode(id uint64, kind model.EventKind, fn func(*model.Node) error) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	p, d, err := r.nodeRefDirty(id)
	if err != nil {
		return r.tx.fail(err)
	}
	old := *p
	d = r.editable(p, d)
	if err := fn(d.n); err != nil {
		*d.n = old // the transaction will not commit; its reads still see the node as it was
		return r.tx.fail(err)
	}
	return r.tx.fail(r.putNode(d, &old, kind))
}

// editable returns the dirty-set entry whose node (n) is p to change and
// hand to putNode: d, p's entry as nodeRefDirty found it, when the
// transaction changed the node before (putNode made it, nothing outside
// the transaction holds it, so it is changed in place: a node changes
// several times an interval), else a new entry, not in the set yet,
// holding a copy of the stored node (editNode), which the cache may share
// with other transactions. The caller keeps a copy of *p first: putNode
// needs the node as it was.
func (r *RunTx) editable(p *model.Node, d *dirtyNode) *dirtyNode {
	if d != nil && d.n == p {
		return d
	}
	d = &dirtyNode{r: r, node: editNode(p), inFrontier: p.Status == model.NodeActive}
	d.n = &d.node
	return d
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Score records a process score in [0,1] for an active node. A second score
// for the same interval replaces the first, so a retried interval does not
// duplicate it.
func (r *RunTx) Score(id uint64, s model.Score) error {
	return r.mutateNode(id, model.EvNodeScore, func(n *model.Node) error {
		if !finite(s.Value) || s.Value < 0 || s.Value > 1 {
			return invalidf("score %v of node %d outside [0,1]", s.Value, id)
		}
		if s.Interval < 0 || s.Turn < 0 {
			return invalidf("score interval %d / turn %d is negative", s.Interval, s.Turn)
		}
		if n.Status != model.NodeActive {
			return invalidf("node %d is %s; only active nodes are scored", id, n.Status)
		}
		for i := range n.Scores {
			if n.Scores[i].Interval == s.Interval {
				n.Scores = replaced(n.Scores, i, s)
				return nil
			}
		}
		n.Scores = append(n.Scores, s)
		return nil
	})
}

// Route records a routing decision and applies the status it implies:
// expand → expanded, prune → pruned, survive → stays active.
func (r *RunTx) Route(id uint64, d model.Decision) error {
	return r.mutateNode(id, model.EvNodeRoute, func(n *model.Node) error {
		if !finite(d.Score) || !finite(d.Reference) || !finite(d.Delta) {
			return invalidf("decision for node %d has a non-finite value", id)
		}
		if d.Interval < 0 || d.Children < 0 {
			return invalidf("decision interval %d / children %d is negative", d.Interval, d.Children)
		}
		if n.Status != model.NodeActive {
			return invalidf("node %d is %s; only active nodes are routed", id, n.Status)
		}
		switch d.Action {
		case model.ActionExpand:
			n.Status = model.NodeExpanded
		case model.ActionPrune:
			n.Status = model.NodePruned
		case model.ActionSurvive:
		default:
			return invalidf("routing action %q", d.Action)
		}
		for i := range n.Decisions {
			if n.Decisions[i].Interval == d.Interval {
				n.Decisions = replaced(n.Decisions, i, d)
				return nil
			}
		}
		n.Decisions = append(n.Decisions, d)
		return nil
	})
}

// SetNodeStatus moves a node along its lifecycle: active → expanded, completed,
// pruned, truncated or failed; failed → active (a retry, which bumps
// Attempt, while the group is open). Anything else is ErrInvalid.
func (r *RunTx) SetNodeStatus(id uint64, s model.NodeStatus) error {
	return r.mutateNode(id, model.EvNodeStatus, func(n *model.Node) error {
		if !s.Valid() {
			return invalidf("node status %q", s)
		}
		if !n.Status.CanMove(s) {
			return invalidf("node %d cannot go from %s to %s", id, n.Status, s)
		}
		if n.Status == model.NodeFailed {
			// A retry needs an open group: a closed group has no active
			// nodes (CloseGroup and Check hold it to that).
			g, err := r.groupRef(n.Step, n.Group)
			if err != nil {
				return err
			}
			if g.Status != model.GroupOpen {
				return invalidf("node %d cannot be retried: group %d is %s", id, g.ID, g.Status)
			}
			n.Attempt++
		}
		n.Status = s
		return nil
	})
}

// FailNode records that an active node's policy, env or scorer call failed,
// or that the outcome reward a finished node awaits never came (see
// Node.AwaitsReward): the node becomes failed with reason as its Error. It
// is not a leaf and never enters the advantages; SetNodeStatus(id,
// NodeActive) retries an active node's failure.
func (r *RunTx) FailNode(id uint64, reason string) error {
	return r.mutateNode(id, model.EvNodeStatus, func(n *model.Node) error {
		if n.Status != model.NodeActive && !n.AwaitsReward() {
			return invalidf("node %d is %s; only an active node, or a finished one awaiting its reward, fails", id, n.Status)
		}
		if err := validText(nil, "error", reason); err != nil {
			return err
		}
		n.Status, n.Error = model.NodeFailed, reason
		return nil
	})
}

// SetReward records a node's outcome reward. Any finite value is accepted:
// tasks define their own scale (ARBOR uses -1 for a malformed answer).
func (r *RunTx) SetReward(id uint64, reward float64) error {
	return r.mutateNode(id, model.EvNodeReward, func(n *model.Node) error {
		if !finite(reward) {
			return invalidf("reward %v of node %d is not finite", reward, id)
		}
		if n.Status == model.NodeExpanded {
			return invalidf("node %d is expanded; rewards belong to leaves", id)
		}
		n.Reward, n.HasReward = reward, true
		return nil
	})
}

// SetEnvState stores the opaque env-state reference the Env restores from.
func (r *RunTx) SetEnvState(id uint64, state []byte) error {
	return r.mutateNode(id, model.EvNodeEnvState, func(n *model.Node) error {
		if n.Status != model.NodeActive {
			return invalidf("node %d is %s", id, n.Status)
		}
		n.EnvState = cloneBytes(state)
		return nil
	})
}
