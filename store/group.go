package store

import (
	"maps"

	"github.com/patrdb/patrdb/model"
)

// GroupSpec describes a group to open.
type GroupSpec struct {
	Step         uint64
	Task         string
	Prompt       string
	PromptTokens []uint32 // the prompt's token ids, when the trainer has them
	Gold         string
	Meta         map[string]string
}

// OpenGroup creates an open group at spec.Step with an id from the run's
// group sequence. Steps start at 1.
func (r *RunTx) OpenGroup(spec GroupSpec) (model.Group, error) {
	if err := r.tx.check(true); err != nil {
		return model.Group{}, err
	}
	if err := validStep(spec.Step); err != nil {
		return model.Group{}, r.tx.fail(err)
	}
	if err := validText(spec.Meta, "gold", spec.Gold, "prompt", spec.Prompt, "task", spec.Task); err != nil {
		return model.Group{}, r.tx.fail(err)
	}
	if err := validTokenIDs("prompt token", spec.PromptTokens); err != nil {
		return model.Group{}, r.tx.fail(err)
	}
	b, err := r.bucket(bGroups)
	if err != nil {
		return model.Group{}, r.tx.fail(err)
	}
	id, err := b.NextSequence()
	if err != nil {
		return model.Group{}, r.tx.fail(err)
	}
	g := model.Group{ID: id, Step: spec.Step, Task: spec.Task, Prompt: spec.Prompt, Gold: spec.Gold, Status: model.GroupOpen, Meta: maps.Clone(spec.Meta)}
	if spec.PromptTokens != nil {
		g.PromptTokens = append(model.TokenIDs{}, spec.PromptTokens...)
	}
	out := cloneGroup(&g)
	return out, r.tx.fail(r.putGroup(&g, "", model.EvGroupOpen))
}

// putGroup makes g, which was in status was ("" for a new group), the
// group's record (written once per transaction, at flush), keeps the run's
// counters and group index to it, and logs kind with the group as
// payload. g is the caller's own copy and must not change afterwards.
func (r *RunTx) putGroup(g *model.Group, was model.GroupStatus, kind model.EventKind) error {
	d := groupDelta(was, g)
	if err := r.tally(&d); err != nil {
		return err
	}
	var val []byte
	if kind != "" {
		val = r.tx.groupValue(g)
	}
	r.setGroup(g, val)
	if kind == "" {
		return nil
	}
	return r.appendEvent(model.Event{Kind: kind, Step: g.Step, Group: g.ID}, val)
}

// GroupAt returns the group with the given step and id.
func (r *RunTx) GroupAt(step, id uint64) (model.Group, error) {
	if r.checking() {
		return r.chk.GroupAt(step, id)
	}
	g, err := r.groupRef(step, id)
	if err != nil {
		return model.Group{}, err
	}
	return cloneGroup(g), nil
}

// Group finds a group by id alone, through the run's group index (a run
// written before the index existed is scanned).
func (r *RunTx) Group(id uint64) (model.Group, error) {
	if r.checking() {
		return r.chk.Group(id)
	}
	if ids := r.b.Bucket([]byte(bGroupIDs)); ids != nil {
		prefix := u64key(id)
		k, _ := ids.Cursor().Seek(prefix)
		if k == nil || len(k) != 16 || keyU64(k, 0) != id {
			return model.Group{}, notFoundf("group %d of run %q", id, r.id)
		}
		return r.GroupAt(keyU64(k, 1), id)
	}
	var found *model.Group
	err := r.ForEachGroup(0, func(g model.Group) error {
		if g.ID == id {
			found = &g
			return errStop
		}
		return nil
	})
	if err != nil && err != errStop {
		return model.Group{}, err
	}
	if found == nil {
		return model.Group{}, notFoundf("group %d of run %q", id, r.id)
	}
	return *found, nil
}

// ForEachGroup calls fn for every group of step (0: every step) in key
// order.
func (r *RunTx) ForEachGroup(step uint64, fn func(model.Group) error) error {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return err
		}
		return p.ForEachGroup(step, fn)
	}
	b, err := r.groupsBucket()
	if err != nil {
		return err
	}
	c := b.Cursor()
	var k, v []byte
	if step == 0 {
		k, v = c.First()
	} else {
		k, v = c.Seek(u64key(step))
	}
	for ; k != nil; k, v = c.Next() {
		if len(k) != 16 {
			return &CorruptError{Bucket: r.bpath(bGroups), Key: cloneBytes(k), Reason: "group key is not 16 bytes"}
		}
		if step != 0 && keyU64(k, 0) != step {
			break
		}
		var g model.Group
		if err := decodeValue(r.bpath(bGroups), k, v, &g); err != nil {
			return err
		}
		if err := fn(g); err != nil {
			return err
		}
	}
	return nil
}

// LatestGroup returns the newest group: the highest id of the latest step.
func (r *RunTx) LatestGroup() (model.Group, error) {
	if r.checking() {
		return r.chk.LatestGroup()
	}
	var g model.Group
	b, err := r.groupsBucket()
	if err != nil {
		return g, err
	}
	k, v := b.Cursor().Last()
	if k == nil {
		return g, notFoundf("groups of run %q", r.id)
	}
	if len(k) != 16 {
		return g, &CorruptError{Bucket: r.bpath(bGroups), Key: cloneBytes(k), Reason: "group key is not 16 bytes"}
	}
	err = decodeValue(r.bpath(bGroups), k, v, &g)
	return g, err
}

// ForEachGroupDesc calls fn for every group from the newest step down (and
// within a step from the highest id down). A resume looks for the open
// groups of the latest step, so walking backwards stops after a few keys
// instead of reading the whole run.
func (r *RunTx) ForEachGroupDesc(fn func(model.Group) error) error {
	if r.checking() {
		p, err := r.chk.Sound()
		if err != nil {
			return err
		}
		return p.ForEachGroupDesc(fn)
	}
	b, err := r.groupsBucket()
	if err != nil {
		return err
	}
	c := b.Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		if len(k) != 16 {
			return &CorruptError{Bucket: r.bpath(bGroups), Key: cloneBytes(k), Reason: "group key is not 16 bytes"}
		}
		var g model.Group
		if err := decodeValue(r.bpath(bGroups), k, v, &g); err != nil {
			return err
		}
		if err := fn(g); err != nil {
			return err
		}
	}
	return nil
}

// Groups returns the groups of step (0: all).
func (r *RunTx) Groups(step uint64) ([]model.Group, error) {
	if r.checking() && step != 0 {
		return r.chk.Groups(step)
	}
	var out []model.Group // in checked mode, step 0 is ForEachGroup's whole-run check
	err := r.ForEachGroup(step, func(g model.Group) error { out = append(out, g); return nil })
	return out, err
}

// SetGroupInterval records how many intervals of the group are committed,
// which is where a resume continues.
func (r *RunTx) SetGroupInterval(step, id uint64, interval int) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	ref, err := r.groupRef(step, id)
	if err != nil {
		return r.tx.fail(err)
	}
	g := *ref // a new version, sharing the slices and map it does not change (setGroup)
	if g.Status != model.GroupOpen {
		return r.tx.fail(invalidf("group %d is %s", id, g.Status))
	}
	if interval < g.Interval {
		return r.tx.fail(invalidf("group %d interval %d goes back from %d", id, interval, g.Interval))
	}
	g.Interval = interval
	return r.tx.fail(r.putGroup(&g, g.Status, model.EvGroupUpdate))
}

// CloseGroup closes an open group. Every node of the group must have left
// the active status.
func (r *RunTx) CloseGroup(step, id uint64) error {
	if err := r.tx.check(true); err != nil {
		return err
	}
	ref, err := r.groupRef(step, id)
	if err != nil {
		return r.tx.fail(err)
	}
	g := *ref // a new version, sharing the slices and map it does not change (setGroup)
	if g.Status != model.GroupOpen {
		return r.tx.fail(invalidf("group %d is already %s", id, g.Status))
	}
	err = r.walkGroupNodes(g, func(n *model.Node) error {
		if n.Status == model.NodeActive {
			return invalidf("group %d still has active node %d", id, n.ID)
		}
		return nil
	})
	if err != nil {
		return r.tx.fail(err)
	}
	g.Status = model.GroupClosed
	return r.tx.fail(r.putGroup(&g, model.GroupOpen, model.EvGroupClose))
}

// GroupNodes returns every node of g, roots first, then breadth-first.
func (r *RunTx) GroupNodes(g model.Group) ([]model.Node, error) {
	if r.checking() {
		return r.chk.GroupNodes(g)
	}
	var out []model.Node
	err := r.walkGroupNodes(g, func(n *model.Node) error {
		out = append(out, cloneNode(n))
		return nil
	})
	return out, err
}

// walkGroupNodes calls fn with every node of g (shared and read-only, see
// nodeRef), roots first, then breadth-first.
// Its queue is the handle's, reused: CloseGroup walks a group per call.
func (r *RunTx) walkGroupNodes(g model.Group, fn func(*model.Node) error) error {
	queue := append(r.walkQueue[:0], g.Roots...)
	r.walkQueue = nil // a walk inside fn takes its own
	queue, err := r.walkQueued(queue, fn)
	r.walkQueue = queue[:0]
	return err
}

// walkQueued is walkGroupNodes from the nodes in queue on, appending
// their children to it; it returns the queue as it grew.
func (r *RunTx) walkQueued(queue []uint64, fn func(*model.Node) error) ([]uint64, error) {
	for i := 0; i < len(queue); i++ {
		id := queue[i]
		n, err := r.nodeRef(id)
		if err != nil {
			return queue, err
		}
		if err := fn(n); err != nil {
			return queue, err
		}
		kids, err := r.children(id)
		if err != nil {
			return queue, err
		}
		queue = append(queue, kids...)
	}
	return queue, nil
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}
