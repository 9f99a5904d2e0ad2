package store

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/patrdb/patrdb/model"
)

// Per-run counters. Every write of a node, group or advantage record calls
// tally once, in the same transaction, so a run's figures (nodes by status,
// leaves, turns, groups open and closed, rewards, zero-variance groups) are
// read from a few small records instead of by walking the nodes. They live
// in two nested buckets of the run's bucket, created together:
//
//	counts/0            the run's totals
//	counts/step         one step's figures
//	groupids/group|step empty value: finds a group's key from its id alone
//
// A run written before the counters existed has neither bucket. Reading it
// walks the records instead (RunSummary.Walked says so); the first write
// transaction that touches it, or Recount, builds both from the records.

const (
	bCounts   = "counts"
	bGroupIDs = "groupids"
)

// counts are the figures of a run or of one step. Fields are signed: a
// delta between two versions of a record is a counts too.
type counts struct {
	_msgpack     struct{} `msgpack:",as_array"`
	Groups       int64
	OpenGroups   int64
	ZeroVariance int64 // groups whose advantages say the outcome rewards had no variance
	ByStatus     [nStatuses]int64
	Turns        int64 // own turns stored
	Materialised int64 // sum of the leaves' path lengths
	Rewarded     int64 // leaves with an outcome reward
	RewardSum    float64
}

// statusOrder is the order of counts.ByStatus and of every listing by
// status.
var statusOrder = [...]model.NodeStatus{model.NodeActive, model.NodeExpanded, model.NodeCompleted, model.NodePruned, model.NodeTruncated, model.NodeFailed}

const nStatuses = len(statusOrder)

// statusIndex is s's place in statusOrder (-1: not a status). Every node
// write counts through it twice, so it is a switch, not a search.
func statusIndex(s model.NodeStatus) int {
	switch s {
	case model.NodeActive:
		return 0
	case model.NodeExpanded:
		return 1
	case model.NodeCompleted:
		return 2
	case model.NodePruned:
		return 3
	case model.NodeTruncated:
		return 4
	case model.NodeFailed:
		return 5
	}
	return -1
}

// add adds d to c. tally adds a delta twice for every record written, so
// the statuses are added one by one rather than in a loop (a fifth of
// tally's instructions).
func (c *counts) add(d *counts) {
	c.Groups += d.Groups
	c.OpenGroups += d.OpenGroups
	c.ZeroVariance += d.ZeroVariance
	c.ByStatus[0] += d.ByStatus[0]
	c.ByStatus[1] += d.ByStatus[1]
	c.ByStatus[2] += d.ByStatus[2]
	c.ByStatus[3] += d.ByStatus[3]
	c.ByStatus[4] += d.ByStatus[4]
	c.ByStatus[5] += d.ByStatus[5]
	c.Turns += d.Turns
	c.Materialised += d.Materialised
	c.Rewarded += d.Rewarded
	c.RewardSum += d.RewardSum
}

// add and zero name every status: a seventh must be added to both.
var _ = [1]struct{}{}[nStatuses-6]

// zero reports whether c is all zeros (RewardSum == 0, as *c == counts{}
// compares it), field by field: the struct comparison is a call.
func (c *counts) zero() bool {
	return c.Groups == 0 && c.OpenGroups == 0 && c.ZeroVariance == 0 &&
		c.ByStatus[0] == 0 && c.ByStatus[1] == 0 && c.ByStatus[2] == 0 &&
		c.ByStatus[3] == 0 && c.ByStatus[4] == 0 && c.ByStatus[5] == 0 &&
		c.Turns == 0 && c.Materialised == 0 && c.Rewarded == 0 && c.RewardSum == 0
}

func (c *counts) nodes() int64 {
	var n int64
	for _, x := range c.ByStatus {
		n += x
	}
	return n
}

func (c *counts) leaves() int64 {
	var n int64
	for i, s := range statusOrder {
		if s.Leaf() {
			n += c.ByStatus[i]
		}
	}
	return n
}

// node adds sign times n's contribution.
func (c *counts) node(n *model.Node, sign int64) {
	if i := statusIndex(n.Status); i >= 0 {
		c.ByStatus[i] += sign
	}
	c.Turns += sign * int64(n.Turns)
	if n.Status.Leaf() {
		c.Materialised += sign * int64(n.PathLen())
		if n.HasReward {
			c.Rewarded += sign
			c.RewardSum += float64(sign) * n.Reward
		}
	}
}

func (c *counts) group(s model.GroupStatus, sign int64) {
	c.Groups += sign
	if s == model.GroupOpen {
		c.OpenGroups += sign
	}
}

// delta is what one record write changes: the figures of its step, and a
// group id to index when the write creates a group.
type delta struct {
	step     uint64
	c        counts
	newGroup uint64
}

// nodeDelta sets d, zero, to the change from old (nil for a new node) to
// n. (Filled in place: a delta is 15 words, and one is made for most
// changes of a node.)
func nodeDelta(d *delta, old, n *model.Node) {
	d.step = n.Step
	if old != nil {
		// Unchanged contributions are skipped, not subtracted and added:
		// the reward sum is a float and must not drift.
		if sameCounted(old, n) {
			return
		}
		d.c.node(old, -1)
	}
	d.c.node(n, 1)
}

// sameCounted reports whether a node's versions old and n count the same
// (counts.node): then their delta is zero. Most changes of a node — a
// score, a decision, turns of a node not yet a leaf... — are, and putNode
// skips tally for them.
func sameCounted(old, n *model.Node) bool {
	return old.Status == n.Status && old.Turns == n.Turns && old.Base == n.Base &&
		old.HasReward == n.HasReward && old.Reward == n.Reward
}

// groupDelta is the change from a group in status was ("" for a new group)
// to g.
func groupDelta(was model.GroupStatus, g *model.Group) delta {
	d := delta{step: g.Step}
	if was == "" {
		d.newGroup = g.ID
	} else {
		d.c.group(was, -1)
	}
	d.c.group(g.Status, 1)
	return d
}

// advDelta is the change to the zero-variance groups when a is written: a
// group counts by its first advantage record (the lowest leaf id), as
// readers take adv[0]. It reads that record before a is put, from the
// file the first time in a transaction and from r.advFirst after (a
// step's advantages are put group by group, a dozen leaves each).
func (r *RunTx) advDelta(a *model.Advantage) (delta, error) {
	d := delta{step: a.Step}
	gk := groupKey{a.Step, a.Group}
	first, ok := r.advFirst[gk]
	if !ok {
		b, err := r.bucket(bAdv)
		if err != nil {
			return d, err
		}
		prefix := u64key2(a.Step, a.Group)
		if k, v := b.Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
			var rec model.Advantage
			if err := decodeValue(r.bpath(bAdv), k, v, &rec); err != nil {
				return d, err
			}
			first = advFirst{exists: true, zeroVariance: rec.ZeroVariance, leaf: math.MaxUint64}
			if len(k) == 24 {
				first.leaf = keyU64(k, 2)
			}
		}
	}
	was, now := first.exists && first.zeroVariance, a.ZeroVariance
	if first.exists && first.leaf < a.Leaf {
		if ok {
			return d, nil // a later leaf of a group already known: nothing changes
		}
		now = was
	} else {
		first = advFirst{exists: true, zeroVariance: a.ZeroVariance, leaf: a.Leaf}
	}
	if r.advFirst == nil {
		r.advFirst = map[groupKey]advFirst{}
	}
	r.advFirst[gk] = first
	d.c.ZeroVariance = b2i(now) - b2i(was)
	return d, nil
}

// advFirst is what advDelta knows of a group's first advantage record.
type advFirst struct {
	exists       bool
	zeroVariance bool
	leaf         uint64
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// runCounts is a write transaction's copy of a run's counters: loaded on
// the first write, written back once before the commit.
type runCounts struct {
	byStep map[uint64]*counts // 0: the run's totals
	dirty  map[uint64]bool
	// total and last (of step lastStep) are byStep[0] and the step last
	// tallied, marked dirty since the last flush: tally runs on every
	// write, almost always to the step before, and skips the maps then.
	total, last *counts
	lastStep    uint64
}

// tally applies one record write to the run's counters. Every writer of a
// node, group or advantage record calls it once, before the record is put,
// so that a run without counters is counted from its records as they were.
func (r *RunTx) tally(d *delta) error {
	if d.c.zero() && d.newGroup == 0 {
		return nil
	}
	rc, err := r.writeCounts()
	if err != nil {
		return err
	}
	if rc.total == nil {
		if rc.total, err = rc.get(r, 0); err != nil {
			return err
		}
		rc.dirty[0] = true
	}
	if rc.last == nil || rc.lastStep != d.step {
		if rc.last, err = rc.get(r, d.step); err != nil {
			return err
		}
		rc.lastStep = d.step
		rc.dirty[d.step] = true
	}
	rc.total.add(&d.c)
	rc.last.add(&d.c)
	if d.newGroup != 0 {
		return r.b.Bucket([]byte(bGroupIDs)).Put(u64key2(d.newGroup, d.step), []byte{})
	}
	return nil
}

func (rc *runCounts) get(r *RunTx, step uint64) (*counts, error) {
	if c := rc.byStep[step]; c != nil {
		return c, nil
	}
	c := new(counts)
	b := r.b.Bucket([]byte(bCounts))
	k := u64key(step)
	if raw := b.Get(k); raw != nil {
		if err := decodeValue(r.bpath(bCounts), k, raw, c); err != nil {
			return nil, err
		}
	}
	rc.byStep[step] = c
	return c, nil
}

// writeCounts returns the transaction's counters of the run, building the
// buckets from the records first if the run has none.
func (r *RunTx) writeCounts() (*runCounts, error) {
	if r.counts != nil {
		return r.counts, nil
	}
	if r.b.Bucket([]byte(bCounts)) == nil || r.b.Bucket([]byte(bGroupIDs)) == nil {
		if err := r.recount(); err != nil {
			return nil, err
		}
	}
	if r.counts == nil {
		r.counts = &runCounts{byStep: map[uint64]*counts{}, dirty: map[uint64]bool{}}
	}
	return r.counts, nil
}

// Recount rebuilds the run's counters and group index from its records,
// replacing whatever they held. A write transaction does it by itself for a
// run written before the counters existed; a migration or a repair calls it
// to do it up front.
func (r *RunTx) Recount() error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	return r.tx.fail(r.recount())
}

func (r *RunTx) recount() error {
	byStep, err := r.walkCounts()
	if err != nil {
		return err
	}
	if err := r.keepDroppedCounts(byStep); err != nil {
		return err
	}
	for _, name := range []string{bCounts, bGroupIDs} {
		if r.b.Bucket([]byte(name)) != nil {
			if err := r.b.DeleteBucket([]byte(name)); err != nil {
				return err
			}
		}
		b, err := r.b.CreateBucket([]byte(name))
		if err != nil {
			return err
		}
		b.FillPercent = 1.0
	}
	ids := r.b.Bucket([]byte(bGroupIDs))
	err = r.ForEachGroup(0, func(g model.Group) error { return ids.Put(u64key2(g.ID, g.Step), []byte{}) })
	if err != nil {
		return err
	}
	rc := &runCounts{byStep: byStep, dirty: map[uint64]bool{}}
	for step := range byStep {
		rc.dirty[step] = true
	}
	r.counts = rc
	r.tx.db.log.Info("patrdb: counted run from its records", "run", r.id, "groups", byStep[0].Groups, "nodes", byStep[0].nodes())
	return nil
}

// flushCounts writes the counters this transaction changed.
func (r *RunTx) flushCounts() error {
	if r.counts == nil {
		return nil
	}
	b := r.b.Bucket([]byte(bCounts))
	for step := range r.counts.dirty {
		if err := b.Put(u64key(step), r.tx.countsValue(r.counts.byStep[step])); err != nil {
			return err
		}
	}
	clear(r.counts.dirty)
	r.counts.total, r.counts.last = nil, nil // marked dirty again by the next tally
	return nil
}

// flushCounts writes every run's changed counters; Update calls it before
// committing.
func (tx *Tx) flushCounts() error {
	for _, r := range tx.runs {
		if err := r.flushCounts(); err != nil {
			return err
		}
	}
	return nil
}

// tallier counts records as a walk meets them: groups, nodes, and the
// advantages in key order (a group counts by its first).
type tallier struct {
	byStep  map[uint64]*counts
	lastAdv []byte // step|group of the last advantage seen
}

func newTallier() *tallier { return &tallier{byStep: map[uint64]*counts{}} }

func (t *tallier) at(step uint64) *counts {
	c := t.byStep[step]
	if c == nil {
		c = new(counts)
		t.byStep[step] = c
	}
	return c
}

func (t *tallier) group(g *model.Group) { t.at(g.Step).group(g.Status, 1) }
func (t *tallier) node(n *model.Node)   { t.at(n.Step).node(n, 1) }

// first reports whether an advantage key (24 bytes) is its group's first.
func (t *tallier) first(k []byte) bool {
	if t.lastAdv != nil && bytes.Equal(k[:16], t.lastAdv) {
		return false
	}
	t.lastAdv = append(t.lastAdv[:0], k[:16]...)
	return true
}

func (t *tallier) adv(a *model.Advantage) {
	if a.ZeroVariance {
		t.at(a.Step).ZeroVariance++
	}
}

// totals adds every step into step 0 and returns the counts by step.
func (t *tallier) totals() map[uint64]*counts {
	total := new(counts)
	for _, c := range t.byStep {
		total.add(c)
	}
	t.byStep[0] = total
	return t.byStep
}

// walkCounts computes the counters from the records: every group, node and
// first advantage of a group.
func (r *RunTx) walkCounts() (map[uint64]*counts, error) {
	t := newTallier()
	if err := r.ForEachGroup(0, func(g model.Group) error { t.group(&g); return nil }); err != nil {
		return nil, err
	}
	nodes, err := r.bucket(bNodes)
	if err != nil {
		return nil, err
	}
	err = nodes.ForEach(func(k, v []byte) error {
		var n model.Node
		if err := decodeValue(r.bpath(bNodes), k, v, &n); err != nil {
			return err
		}
		t.node(&n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	adv, err := r.bucket(bAdv)
	if err != nil {
		return nil, err
	}
	c := adv.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) != 24 {
			return nil, &CorruptError{Bucket: r.bpath(bAdv), Key: cloneBytes(k), Reason: "advantage key is not step|group|leaf"}
		}
		if !t.first(k) {
			continue
		}
		var a model.Advantage
		if err := decodeValue(r.bpath(bAdv), k, v, &a); err != nil {
			return nil, err
		}
		t.adv(&a)
	}
	return t.totals(), nil
}

// storedCounts calls fn with the run's counters in step order (0, the
// totals, first), or returns ok false when the run has none (written
// before they existed).
func (r *RunTx) storedCounts(fn func(step uint64, c *counts) error) (ok bool, err error) {
	if err := r.flushCounts(); err != nil { // this transaction's own changes
		return true, err
	}
	b := r.b.Bucket([]byte(bCounts))
	if b == nil || r.b.Bucket([]byte(bGroupIDs)) == nil {
		return false, nil
	}
	cur := b.Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) != 8 {
			return true, &CorruptError{Bucket: r.bpath(bCounts), Key: cloneBytes(k), Reason: "key is not a step"}
		}
		var c counts
		if err := decodeValue(r.bpath(bCounts), k, v, &c); err != nil {
			return true, err
		}
		if err := fn(keyU64(k, 0), &c); err != nil {
			return true, err
		}
	}
	return true, nil
}

func (c *counts) String() string {
	var by strings.Builder
	for i, st := range statusOrder {
		if i > 0 {
			by.WriteByte(' ')
		}
		fmt.Fprintf(&by, "%s=%d", st, c.ByStatus[i])
	}
	return fmt.Sprintf("%d groups (%d open), %d nodes (%s), %d turns, %d materialised, %d rewarded (sum %g), %d zero-variance groups",
		c.Groups, c.OpenGroups, c.nodes(), by.String(), c.Turns, c.Materialised, c.Rewarded, c.RewardSum, c.ZeroVariance)
}

// storedTotals reads the run's totals into total and the latest step with
// an open group into openStep, or returns ok false when the run has no
// counters. The step is looked for from the newest back, in windows of
// steps that grow fourfold, stopping at the first window with an open
// group: a run's open groups are those of its last steps, so a few records
// are read whatever the run's length. reach, when set, checks the pages a
// cursor reads through [lo, hi) first (see summary).
func (r *RunTx) storedTotals(total *counts, openStep *uint64, reach func(lo, hi []byte) bool) (ok bool, err error) {
	if err := r.flushCounts(); err != nil { // this transaction's own changes
		return true, err
	}
	b := r.b.Bucket([]byte(bCounts))
	if b == nil || r.b.Bucket([]byte(bGroupIDs)) == nil {
		return false, nil
	}
	if reach == nil {
		reach = func(lo, hi []byte) bool { return true }
	}
	path := r.bpath(bCounts)
	k0 := u64key(0)
	if !reach(k0, pointEnd(k0)) {
		return true, nil // the caller reports the damaged page
	}
	if raw := b.Get(k0); raw != nil {
		if err := decodeValue(path, k0, raw, total); err != nil {
			return true, err
		}
	}
	if total.OpenGroups <= 0 {
		return true, nil
	}
	end := u64key(math.MaxUint64) // a seek past every step reads the pages Last does
	if !reach(end, nil) {
		return true, nil
	}
	cur := b.Cursor()
	k, _ := cur.Last()
	if len(k) != 8 {
		return true, &CorruptError{Bucket: path, Key: cloneBytes(k), Reason: "key is not a step"}
	}
	var hi []byte // nil: to the end
	// w saturates: a damaged key may lie near 2^64, and a window that
	// wrapped to 0 would never reach step 1.
	for last, w := keyU64(k, 0), uint64(4); ; w = min(w, math.MaxUint64/4) * 4 {
		lo := uint64(1)
		if last > w {
			lo = last - w + 1
		}
		if !reach(u64key(lo), hi) {
			return true, nil
		}
		for k, v := cur.Seek(u64key(lo)); k != nil && (hi == nil || string(k) < string(hi)); k, v = cur.Next() {
			if len(k) != 8 {
				return true, &CorruptError{Bucket: path, Key: cloneBytes(k), Reason: "key is not a step"}
			}
			var c counts
			if err := decodeValue(path, k, v, &c); err != nil {
				return true, err
			}
			if c.OpenGroups > 0 {
				*openStep = keyU64(k, 0)
			}
		}
		if *openStep != 0 || lo == 1 {
			return true, nil
		}
		hi, last = u64key(lo), lo-1
	}
}
