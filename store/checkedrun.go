package store

import (
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store/internal/pagewalk"
)

// checkedRun is what a run handle of a transaction in checked mode
// (Tx.CheckReads) reads through: it checks only what each read touches: before a method reads, it walks with bounds the
// pages its lookups follow (internal/pagewalk Paths: the root-to-leaf
// paths of those keys, not the buckets), and it checks every record it
// returns against what it links to, with the same per-record checks as
// the check of a whole run (checkrecords.go): a group against its roots; a node against
// its group, its parent, the children index, the frontier and its stored
// turns (each decoded, so its CRC is checked); an advantage against its
// leaf. A damaged page or record on the way is a *CorruptError and
// nothing is returned, so a reader never prints part of what it asked
// for as if it were whole; damage elsewhere in the run does not stop it.
// It costs time in proportion to what is read, not to the run.
//
// What a narrow read cannot see, the whole-run check does: a record that
// vanished whole with nothing read pointing at it (an index entry gone
// from a page that is still well-formed), and a record that disagrees
// with the event log. Sound runs that check once, for readers of the
// whole run.
//
// A checkedRun is for a read transaction and lives as long as it.
type checkedRun struct {
	r       *RunTx
	paths   *pagewalk.Paths
	buckets map[string]pagewalk.Bucket // the run's sub-buckets, headers checked
	c       *checker
	rc      *runCheck
	done    map[string]bool // records checked, by bucket and key
	sound   error
	whole   bool // Sound ran
	summary error
	walked  bool // summaryWalk ran
	pages   error
	paged   bool // BucketSizes walked the run's pages
}

// checkedRun opens run id for checked reads, checking the pages that
// finding the run and its sub-buckets follows and the run record.
// ErrNotFound when the run does not exist.
func (tx *Tx) checkedRun(id string) (*checkedRun, error) {
	cr := &checkedRun{
		paths:   tx.pagePaths(),
		buckets: map[string]pagewalk.Bucket{},
		c:       &checker{tx: tx},
		done:    map[string]bool{},
	}
	found := false
	err := cr.read(func() {
		p := cr.paths
		runs, ok := p.Sub(p.Root(), string(bucketRuns))
		if !ok {
			return
		}
		run, ok := p.Sub(runs, id)
		if !ok || !p.All(run) {
			return
		}
		found = true
		for _, name := range append(subBuckets[:], laterBuckets[:]...) {
			if b, ok := p.Sub(run, name); ok {
				cr.buckets[name] = b
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, notFoundf("run %q", id)
	}
	if cr.r, err = tx.handle(id); err != nil {
		return nil, err
	}
	for _, name := range subBuckets {
		if cr.r.subBucket(name) == nil {
			return nil, &CorruptError{Bucket: cr.r.path, Reason: "missing sub-bucket " + name}
		}
	}
	err = cr.read(func() {
		info := cr.c.runRecord(cr.r)
		cr.rc = newRunCheck(cr.r, info.LastStep)
		cr.rc.narrow = cr
	})
	if err != nil {
		return nil, err
	}
	return cr, nil
}

// read runs fn, which checks what it reads, with the file open for the
// page walks, and returns the first problem found: a damaged page, else a
// record that failed its checks. A fault inside bbolt (which a checked
// page cannot cause) is a problem too, not a crash.
func (cr *checkedRun) read(fn func()) error {
	if err := cr.paths.Open(); err != nil {
		return err
	}
	defer cr.paths.Close()
	cr.c.guard(cr.path(), fn)
	if err := walkError(&cr.paths.Walker); err != nil {
		return err
	}
	if len(cr.c.vs) > 0 {
		return violationsError(cr.c.vs)
	}
	return nil
}

func (cr *checkedRun) path() string {
	if cr.r == nil {
		return "runs"
	}
	return cr.r.path
}

// reach checks the pages a cursor follows through the keys lo <= k < hi
// of sub-bucket name, and reports whether they are sound.
func (cr *checkedRun) reach(name string, lo, hi []byte) bool {
	b, ok := cr.buckets[name]
	if !ok {
		return false // a missing bucket: bbolt reads nothing
	}
	return cr.paths.Range(b, lo, hi)
}

// reachTurns checks the pages holding n's turns (and the one after them).
func (cr *checkedRun) reachTurns(n *model.Node, legacy bool) bool {
	if legacy {
		return cr.reach(bTurns, u64key(n.ID), prefixEnd(u64key(n.ID)))
	}
	for _, rg := range n.TurnRanges {
		if !cr.reach(bTurns, u64key(rg.Seq), u64key(rg.Seq+uint64(rg.Count))) {
			return false
		}
	}
	return true
}

// once reports whether the record at key of bucket name is met for the
// first time (each record is checked once per run handle).
func (cr *checkedRun) once(name string, key []byte) bool {
	k := name + "/" + string(key)
	if cr.done[k] {
		return false
	}
	cr.done[k] = true
	return true
}

// indexedGroup finds group id through the group index.
func (cr *checkedRun) indexedGroup(rc *runCheck, id uint64) *groupInfo {
	if !cr.reach(bGroupIDs, u64key(id), prefixEnd(u64key(id))) {
		return nil
	}
	k, _ := cr.r.b.Bucket([]byte(bGroupIDs)).Cursor().Seek(u64key(id))
	if len(k) != 16 || keyU64(k, 0) != id {
		return nil
	}
	return rc.group(keyU64(k, 1), id)
}

// checkGroup checks the group record at step|id and its roots' records,
// once.
func (cr *checkedRun) checkGroup(step, id uint64) {
	k := u64key2(step, id)
	if !cr.once(bGroups, k) {
		return
	}
	v := cr.rc.get(bGroups, k)
	if v == nil {
		return
	}
	var g model.Group
	if decodeValue(cr.r.bpath(bGroups), k, v, &g) == nil && g.Step == step && g.ID == id {
		// The roots first: a damaged root record is then named as such,
		// not as a root the group lists in vain.
		for _, root := range g.Roots {
			cr.rc.roots.add(root)
		}
		for _, root := range g.Roots {
			cr.checkNode(root)
		}
	}
	cr.c.group(cr.rc, k, v)
}

// checkNode checks node id's record, its group's and its stored turns,
// once, and returns it (nil when missing or damaged).
func (cr *checkedRun) checkNode(id uint64) *model.Node {
	k := u64key(id)
	v := cr.rc.get(bNodes, k)
	if v == nil {
		return nil
	}
	var n model.Node
	if decodeValue(cr.r.bpath(bNodes), k, v, &n) == nil {
		cr.checkGroup(n.Step, n.Group) // first: a root is checked against its group's roots
	}
	if !cr.once(bNodes, k) {
		return &n
	}
	checked := cr.c.node(cr.rc, k, v)
	if checked != nil {
		cr.checkTurns(checked)
	}
	return checked
}

// checkTurns checks every stored turn of n (decoded: its CRC) and that
// there are as many as its record says.
func (cr *checkedRun) checkTurns(n *model.Node) {
	legacy := cr.r.legacyTurns()
	k := u64key(n.ID)
	cr.c.nodeTurns(cr.rc, k, n, legacy)
	if len(cr.c.vs) > 0 || !cr.reachTurns(n, legacy) {
		return
	}
	owner := func(id uint64) *model.Node {
		if id == n.ID {
			return n
		}
		return cr.rc.node(id)
	}
	path := cr.r.bpath(bTurns)
	cur := cr.r.subBucket(bTurns).Cursor()
	if legacy {
		for k, v := cur.Seek(u64key(n.ID)); k != nil && len(k) == 16 && keyU64(k, 0) == n.ID; k, v = cur.Next() {
			cr.c.turn(path, k, v, legacy, owner)
		}
		return
	}
	for _, rg := range n.TurnRanges {
		end := rg.Seq + uint64(rg.Count)
		for k, v := cur.Seek(u64key(rg.Seq)); k != nil && len(k) >= 8 && keyU64(k, 0) < end; k, v = cur.Next() {
			cr.c.turn(path, k, v, legacy, owner)
		}
	}
}

// checkChildren checks node id's entries of the children index, once, and
// returns the children they name.
func (cr *checkedRun) checkChildren(id uint64) []uint64 {
	lo := u64key(id)
	if !cr.reach(bChildren, lo, prefixEnd(lo)) {
		return nil
	}
	var out []uint64
	first := cr.once(bChildren, lo)
	c := cr.r.subBucket(bChildren).Cursor()
	for k, v := c.Seek(lo); k != nil && len(k) == 16 && keyU64(k, 0) == id; k, v = c.Next() {
		if first {
			// The child first: when its record is damaged, that is the
			// problem to name, not the entry that disagrees with it.
			cr.checkNode(keyU64(k, 1))
			cr.c.childEntry(cr.rc, k, v)
		}
		out = append(out, keyU64(k, 1))
	}
	return out
}

// checkAdvantages checks the advantage records under prefix (step|group,
// step or nothing), once.
func (cr *checkedRun) checkAdvantages(prefix []byte) {
	if !cr.once(bAdv, prefix) || !cr.reach(bAdv, prefix, prefixEnd(prefix)) {
		return
	}
	c := cr.r.subBucket(bAdv).Cursor()
	for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		if cr.once(bAdv, k) {
			cr.c.advantage(cr.rc, k, v)
		}
	}
}

// checkGroupsUnder checks the group records under prefix (a step or
// nothing), once.
func (cr *checkedRun) checkGroupsUnder(prefix []byte) {
	if !cr.once(bGroups+"*", prefix) || !cr.reach(bGroups, prefix, prefixEnd(prefix)) {
		return
	}
	c := cr.r.subBucket(bGroups).Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) == 16 {
			cr.checkGroup(keyU64(k, 0), keyU64(k, 1))
		} else {
			cr.c.inv(cr.r.bpath(bGroups), cloneBytes(k), "key is not step|group")
		}
	}
}

// checkTree checks the nodes of group g, its children index entries and
// its leaves' advantages, walking down from its roots; it stops at the
// first problem (a damaged index could lead anywhere).
func (cr *checkedRun) checkTree(g model.Group) {
	cr.checkGroup(g.Step, g.ID)
	queue := append([]uint64(nil), g.Roots...)
	seen := map[uint64]bool{}
	for len(queue) > 0 && len(cr.c.vs) == 0 && cr.paths.OK() {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			cr.c.inv(cr.r.bpath(bChildren), u64key(id), "node %d is reached twice from group %d's roots", id, g.ID)
			return
		}
		seen[id] = true
		if cr.checkNode(id) == nil {
			return // reported by the node's own check, or it is missing (the read says so)
		}
		queue = append(queue, cr.checkChildren(id)...)
	}
	cr.checkAdvantages(u64key2(g.Step, g.ID))
}

// Info is RunTx.Info (checked when the run was opened).
func (cr *checkedRun) Info() (model.Run, error) { return cr.r.Info() }

// ID is the run's id.
func (cr *checkedRun) ID() string { return cr.r.id }

// LastSeq is RunTx.LastSeq, checked: the pages to the last event are
// walked and the event compared with the sequence.
func (cr *checkedRun) LastSeq() (uint64, error) {
	return checked(cr, func() { cr.paths.Last(cr.buckets[bEvents]) }, func() (uint64, error) {
		if err := cr.r.checkSequence(bEvents); err != nil {
			return 0, err
		}
		return cr.r.LastSeq(), nil
	})
}

// checked runs check, then, if it found nothing, read, with the file open
// for the page walks: the checks walk the pages read will follow, so read
// touches only checked pages.
func checked[T any](cr *checkedRun, check func(), read func() (T, error)) (T, error) {
	var out T
	var rerr error
	err := cr.read(func() {
		if check(); len(cr.c.vs) == 0 && cr.paths.OK() {
			out, rerr = read()
		}
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, rerr
}

// LatestGroup is RunTx.LatestGroup, checked.
func (cr *checkedRun) LatestGroup() (model.Group, error) {
	return checked(cr, func() { cr.paths.Last(cr.buckets[bGroups]) }, func() (model.Group, error) {
		g, err := cr.r.LatestGroup()
		if err == nil {
			cr.checkGroup(g.Step, g.ID) // before checked returns it
		}
		return g, err
	})
}

// GroupAt is RunTx.GroupAt, checked.
func (cr *checkedRun) GroupAt(step, id uint64) (model.Group, error) {
	return checked(cr, func() { cr.checkGroup(step, id) }, func() (model.Group, error) { return cr.r.GroupAt(step, id) })
}

// Group is RunTx.Group, checked.
func (cr *checkedRun) Group(id uint64) (model.Group, error) {
	return checked(cr, func() {
		ids := cr.r.b.Bucket([]byte(bGroupIDs))
		if ids == nil {
			cr.checkGroupsUnder(nil) // a run written before the index is scanned
		} else if cr.reach(bGroupIDs, u64key(id), prefixEnd(u64key(id))) {
			if k, _ := ids.Cursor().Seek(u64key(id)); len(k) == 16 && keyU64(k, 0) == id {
				cr.checkGroup(keyU64(k, 1), id)
			}
		}
	}, func() (model.Group, error) { return cr.r.Group(id) })
}

// Groups is RunTx.Groups, checked (step 0: every group, each checked).
func (cr *checkedRun) Groups(step uint64) ([]model.Group, error) {
	var prefix []byte
	if step != 0 {
		prefix = u64key(step)
	}
	return checked(cr, func() { cr.checkGroupsUnder(prefix) }, func() ([]model.Group, error) { return cr.r.Groups(step) })
}

// GroupNodes is RunTx.GroupNodes, checked: every node of the group, its
// entries in the children index, its turns, and the group's advantages.
func (cr *checkedRun) GroupNodes(g model.Group) ([]model.Node, error) {
	return checked(cr, func() { cr.checkTree(g) }, func() ([]model.Node, error) { return cr.r.GroupNodes(g) })
}

// Advantages is RunTx.Advantages, checked: each record against its leaf.
func (cr *checkedRun) Advantages(step, group uint64) ([]model.Advantage, error) {
	return checked(cr, func() { cr.checkAdvantages(advPrefix(step, group)) },
		func() ([]model.Advantage, error) { return cr.r.Advantages(step, group) })
}

// Children is RunTx.Children, checked: the node's entries in the children
// index and the children they name.
func (cr *checkedRun) Children(id uint64) ([]uint64, error) {
	return checked(cr, func() { cr.checkChildren(id) }, func() ([]uint64, error) { return cr.r.Children(id) })
}

// LastAdvantage is RunTx.LastAdvantage, checked.
func (cr *checkedRun) LastAdvantage() (model.Advantage, error) {
	return checked(cr, func() { cr.paths.Last(cr.buckets[bAdv]) }, func() (model.Advantage, error) {
		a, err := cr.r.LastAdvantage()
		if k := u64key3(a.Step, a.Group, a.Leaf); err == nil && cr.once(bAdv, k) {
			if v := cr.rc.get(bAdv, k); v != nil {
				cr.c.advantage(cr.rc, k, v) // before checked returns it
			}
		}
		return a, err
	})
}

// Node is RunTx.Node, checked (with its group and turns).
func (cr *checkedRun) Node(id uint64) (model.Node, error) {
	return checked(cr, func() { cr.checkNode(id) }, func() (model.Node, error) { return cr.r.Node(id) })
}

// checkPath checks node id and its ancestors, root last.
func (cr *checkedRun) checkPath(id uint64) {
	for hops := 0; id != 0 && len(cr.c.vs) == 0 && cr.paths.OK(); hops++ {
		n := cr.checkNode(id)
		if n == nil || hops > n.Depth {
			return // missing (the read says so) or reported
		}
		id = n.Parent
	}
}

// Path is RunTx.Path, checked: the node and every ancestor.
func (cr *checkedRun) Path(id uint64) ([]model.Segment, error) {
	return checked(cr, func() { cr.checkPath(id) }, func() ([]model.Segment, error) { return cr.r.Path(id) })
}

// Trajectory is RunTx.Trajectory, checked: the node, every ancestor and
// their turns.
func (cr *checkedRun) Trajectory(id uint64) ([]model.PathTurn, error) {
	return checked(cr, func() { cr.checkPath(id) }, func() ([]model.PathTurn, error) { return cr.r.Trajectory(id) })
}

// ViewTurns is RunTx.ViewTurns, checked: each segment's node, its group
// and its stored turns (all of them decoded, so their CRCs are checked,
// and the pages that hold them walked).
func (cr *checkedRun) ViewTurns(segs []model.Segment) ([]TurnView, error) {
	return checked(cr, func() {
		for _, s := range segs {
			if cr.checkNode(s.Node); len(cr.c.vs) > 0 || !cr.paths.OK() {
				return
			}
		}
	}, func() ([]TurnView, error) { return cr.r.ViewTurns(segs) })
}

// FrontierNodes is RunTx.FrontierNodes, checked: every frontier entry and
// the node it names.
func (cr *checkedRun) FrontierNodes() ([]model.Node, error) {
	return checked(cr, func() {
		if !cr.reach(bFrontier, nil, nil) {
			return
		}
		_ = cr.r.subBucket(bFrontier).ForEach(func(k, v []byte) error {
			if cr.once(bFrontier, k) {
				cr.c.frontierEntry(cr.rc, k, v)
			}
			if len(k) == 8 {
				cr.checkNode(keyU64(k, 0))
			}
			return nil
		})
	}, cr.r.FrontierNodes)
}

// checkSmall checks every record of a small bucket of the run (rubrics,
// checkpoints) with check, once: its records refer to each other (a
// merged rubric to the one it merged into), and there are few.
func (cr *checkedRun) checkSmall(name string, check func(*RunTx)) {
	if cr.once(name, nil) && cr.reach(name, nil, nil) {
		check(cr.r)
	}
}

// Rubrics is RunTx.Rubrics, checked: every rubric of the run.
func (cr *checkedRun) Rubrics(pool model.RubricPool) ([]model.Rubric, error) {
	return checked(cr, func() { cr.checkSmall(bRubrics, cr.c.rubrics) }, func() ([]model.Rubric, error) { return cr.r.Rubrics(pool) })
}

// Rubric is RunTx.Rubric, checked: every rubric of the run.
func (cr *checkedRun) Rubric(id uint64) (model.Rubric, error) {
	return checked(cr, func() { cr.checkSmall(bRubrics, cr.c.rubrics) }, func() (model.Rubric, error) { return cr.r.Rubric(id) })
}

// Checkpoint is RunTx.Checkpoint, checked: every checkpoint of the run.
func (cr *checkedRun) Checkpoint(step uint64) (model.Checkpoint, error) {
	return checked(cr, func() { cr.checkSmall(bCkpt, cr.c.checkpoints) }, func() (model.Checkpoint, error) { return cr.r.Checkpoint(step) })
}

// Sound checks the whole run once (Check with CheckOptions.Run) and then hands out the
// run's plain handle, for reads that have no narrow check (the event log,
// replay, stats, exports).
func (cr *checkedRun) Sound() (*RunTx, error) {
	if !cr.whole {
		cr.whole = true
		vs, err := cr.r.tx.checkRun(cr.r.id, CheckOptions{})
		if err == nil {
			err = violationsError(vs)
		}
		cr.sound = err
	}
	if cr.sound != nil {
		return nil, cr.sound
	}
	return cr.r, nil
}

// Summary is RunTx.Summary, checked: the path to the run's last event
// (its sequence is the summary's event count) and the per-step counters
// the summary reads (the totals and the newest steps back to one with an
// open group, or every step with SummaryOptions.Steps), each page walked
// with bounds and each record decoded. The run record was checked when the
// run was opened. A run without counters, whose figures come from its
// records, is walked whole first (summaryWalk); the bucket sizes walk
// every page of the run (BucketSizes).
func (cr *checkedRun) Summary(o model.SummaryOptions) (model.RunSummary, error) {
	_, counted := cr.buckets[bCounts]
	_, indexed := cr.buckets[bGroupIDs]
	if o.Buckets {
		o.Buckets = false
		s, err := cr.Summary(o)
		if err != nil {
			return s, err
		}
		if s.Buckets, err = cr.BucketSizes(); err != nil {
			return s, err
		}
		for _, b := range s.Buckets {
			s.Bytes += b.Bytes
		}
		return s, nil
	}
	switch {
	case !counted || !indexed:
		if err := cr.summaryWalk(); err != nil {
			return model.RunSummary{}, err
		}
		return cr.r.summary(o, nil)
	}
	return checked(cr, func() {
		if cr.paths.Last(cr.buckets[bEvents]) && o.Steps {
			cr.reach(bCounts, nil, nil)
		}
	}, func() (model.RunSummary, error) {
		if err := cr.r.checkSequence(bEvents); err != nil {
			return model.RunSummary{}, err
		}
		return cr.r.summary(o, func(lo, hi []byte) bool { return cr.reach(bCounts, lo, hi) })
	})
}

// summaryWalk checks once the pages CheckSummary and CheckLastEvent name
// (the run's counters, rubrics, checkpoints and the path to its last
// event; every page of a run without counters), for the summary of a run
// without counters.
func (cr *checkedRun) summaryWalk() error {
	if !cr.walked {
		cr.walked = true
		cr.summary = cr.r.tx.walkParts(cr.r.id, CheckSummary|CheckLastEvent)
	}
	return cr.summary
}

// BucketSizes is RunTx.BucketSizes, checked: every page of the run is
// walked with bounds once (Check with CheckOptions.Parts CheckPages), so
// bbolt's Bucket.Stats over them terminates; the sizes read no record, so
// none is decoded. A whole-run check would read every record too: on a
// run of 201,572 nodes `show --bytes` took 1.96 s that way and takes
// 0.13 s now (bench/RESULTS.md).
func (cr *checkedRun) BucketSizes() ([]model.BucketSize, error) {
	if !cr.paged {
		cr.paged = true
		cr.pages = cr.r.tx.walkParts(cr.r.id, CheckPages)
	}
	if cr.pages != nil {
		return nil, cr.pages
	}
	return cr.r.bucketSizes()
}

// pointEnd is the least key above k: a lookup of k alone reads the keys
// in [k, pointEnd(k)).
func pointEnd(k []byte) []byte { return append(cloneBytes(k), 0) }

// prefixEnd is the least key above every key that starts with p (nil:
// none is, or p is empty).
func prefixEnd(p []byte) []byte {
	end := cloneBytes(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func hasPrefix(k, p []byte) bool { return len(k) >= len(p) && string(k[:len(p)]) == string(p) }

// violationsError is the first of vs as one error, with how many more
// there are; nil for none.
func violationsError(vs []Violation) error {
	if len(vs) == 0 {
		return nil
	}
	v := vs[0]
	reason := v.Detail
	if v.Key != nil {
		reason = fmt.Sprintf("key %x: %s", v.Key, v.Detail)
	}
	if len(vs) > 1 {
		reason += fmt.Sprintf(" (and %d more)", len(vs)-1)
	}
	return &CorruptError{Bucket: v.Bucket, Reason: reason}
}
