package tree

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"sort"
	"time"

	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// held is a granted lease as the coordinator keeps it.
type held struct {
	rollout.Lease
	ttl      time.Duration
	snapshot uint64 // the store snapshot the grant was judged on
}

// LeaseRequest asks for up to Max branches (0: every branch available).
type LeaseRequest struct {
	// Worker names who will do the work; every submit, renewal and release
	// of the lease must name it again.
	Worker string
	Max    int
	Step   uint64        // 0: any open step past the run's last completed one
	TTL    time.Duration // 0: the coordinator's LeaseTTL; at most MaxLeaseTTL
	// PolicyVersion is the version of the weights the worker samples with:
	// a worker more than the run's MaxStaleness behind its current version
	// is refused (ErrStale).
	PolicyVersion uint64
	// Prefer names nodes whose paths the worker holds, oldest first. A
	// request for Max branches offers their branches and children before
	// any other (the newest MaxPrefer of them), so a worker goes on with
	// the paths it has and its grants carry only the turns past them,
	// instead of a child's whole path going to a worker that never saw its
	// parent. Without Max (the engine's wave) the order is unchanged.
	Prefer []uint64
}

// MaxPrefer bounds how many of LeaseRequest.Prefer a grant looks at: each
// costs a node read and its children's index, paid on every request.
const MaxPrefer = 64

// current reports whether l is still the lease of its branch as the store
// stands: the branch is active, in the same attempt, and its group in the
// same interval. A lease that is no longer current is free to hand on.
func (l *held) current(n *model.Node, g *model.Group) bool {
	return n.Status == model.NodeActive && n.Attempt == l.Attempt && g.Status == model.GroupOpen && g.Interval == l.Interval
}

// Lease hands out up to req.Max branches that need work — turns or a score
// in their group's current interval — and that no other worker holds: never
// leased, or whose lease expired (a grace period past its expiry, see
// LeaseGrace), was released, is no longer current, or was voided by a
// published version (OnPublishAbort). Branches come in step, group and node
// order. A lease is not a write: Lease reads the store in a snapshot of its
// own, and no grant is ever judged on a snapshot older than the one an
// earlier grant saw (a snapshot that lost that race is retaken), so a lease
// never describes a state its branch has already left. then, when not nil,
// runs in that same snapshot with the grants (to read the leased branches'
// histories, say) after the table is released; if it fails, the grants are
// released and its error returned.
//
// A request without a worker, with a negative Max or a TTL beyond
// MaxLeaseTTL is model.ErrInvalid; a worker whose PolicyVersion is too
// stale is ErrStale. Under RemoteScores a branch that awaits its score is
// never leased: the remote scorer delivers it (SubmitScores).
func (c *Coordinator) Lease(req LeaseRequest, then func(tx *store.Tx, leases []rollout.Lease) error) ([]rollout.Lease, error) {
	switch {
	case req.Worker == "":
		return nil, fmt.Errorf("%w: a lease request names its worker", model.ErrInvalid)
	case req.Max < 0:
		return nil, fmt.Errorf("%w: max %d is negative", model.ErrInvalid, req.Max)
	case req.TTL < 0 || req.TTL > MaxLeaseTTL:
		return nil, fmt.Errorf("%w: lease TTL %v: want 0 (the default) up to %v", model.ErrInvalid, req.TTL, MaxLeaseTTL)
	}
	for {
		var out []rollout.Lease
		thenFailed := false
		err := c.db.View(func(tx *store.Tx) error {
			var err error
			if out, err = c.grant(tx, req); err != nil || then == nil {
				return err
			}
			err = then(tx, out)
			thenFailed = err != nil
			return err
		})
		if errors.Is(err, errStaleSnapshot) {
			continue
		}
		if thenFailed {
			// The grants never reach their worker: hand the branches back
			// now rather than leave them held until the TTL runs out.
			ids := make([]string, len(out))
			for i, l := range out {
				ids[i] = l.ID
			}
			c.Release(req.Worker, ids)
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// errStaleSnapshot: another grant was judged on a newer snapshot than this
// one; Lease takes a fresh one. The snapshot is taken before the table's
// lock (taking it under the lock could deadlock with a writer remapping the
// file while a reader waits for the table), so the order is checked instead.
var errStaleSnapshot = errors.New("tree: lease snapshot older than an earlier grant's")

// LeaseGrace is how long past its expiry a lease still blocks a new grant
// of its branch (a tenth of its TTL when that is shorter): a submit
// validated just before the expiry may still be committing, and the next
// lease must see what it wrote.
const LeaseGrace = 5 * time.Second

func (l *held) expires() time.Time { return time.Unix(0, l.ExpiresAt) }

// regrantable reports whether a new lease may replace l at now.
func (l *held) regrantable(now time.Time) bool {
	return !now.Before(l.expires().Add(min(LeaseGrace, l.ttl/10)))
}

// voided reports whether a published version voids l: under
// OnPublishAbort, a lease granted before the run's current version.
func (c *Coordinator) voided(l *held, version uint64) bool {
	return c.cfg.OnPublish == OnPublishAbort && l.RunVersion < version
}

// newLeaseID returns 128 random bits: a lease id no other worker can guess.
func newLeaseID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on the platforms Go supports
	return hex.EncodeToString(b[:])
}

// noteVersion remembers the newest run version seen; c.mu must be held.
func (c *Coordinator) noteVersion(v uint64) {
	c.version = max(c.version, v)
}

// drop forgets a lease; c.mu must be held. Its branch may be free now,
// so a round that found nothing to grant is forgotten too.
func (c *Coordinator) drop(l *held) {
	c.idle = idleRound{}
	c.leaseGen++
	if c.leases[l.Node] == l {
		delete(c.leases, l.Node)
	}
	delete(c.byID, l.ID)
}

func (c *Coordinator) grant(tx *store.Tx, req LeaseRequest) ([]rollout.Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tx.Snapshot() < c.granted {
		return nil, errStaleSnapshot
	}
	c.granted = tx.Snapshot()
	ttl := req.TTL
	if ttl == 0 {
		ttl = c.opts.LeaseTTL
	}
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	c.noteVersion(info.PolicyVersion)
	if c.cfg.StaleBy(info.PolicyVersion, req.PolicyVersion) {
		return nil, fmt.Errorf("%w: worker %q samples with policy version %d, %d behind run %q's version %d (max_staleness %d): load newer weights",
			rollout.ErrStale, req.Worker, req.PolicyVersion, info.PolicyVersion-req.PolicyVersion, c.run, info.PolicyVersion, c.cfg.MaxStaleness)
	}
	gs := &grantScan{c: c, r: r, tx: tx, req: req, info: info, ttl: ttl, now: c.opts.Now(), groups: map[uint64]model.Group{}}
	if req.Max == 0 {
		return gs.all()
	}
	return gs.some()
}

// grantScan is one grant's walk of the frontier.
type grantScan struct {
	c      *Coordinator
	r      *store.RunTx
	tx     *store.Tx
	req    LeaseRequest
	info   model.Run
	ttl    time.Duration
	now    time.Time
	groups map[uint64]model.Group
	out    []rollout.Lease
}

// all grants every free branch, in step, group and node order: the
// engine's wave, which must be the same from run to run. It reads the
// whole frontier, and forgets the leases of branches no longer on it.
func (gs *grantScan) all() ([]rollout.Lease, error) {
	c, r := gs.c, gs.r
	active, err := r.FrontierNodes()
	if err != nil {
		return nil, err
	}
	sort.Slice(active, func(i, j int) bool {
		a, b := active[i], active[j]
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.ID < b.ID
	})
	if gs.req.Step == 0 {
		// Keep the table the size of the frontier.
		live := make(map[uint64]bool, len(active))
		for i := range active {
			live[active[i].ID] = true
		}
		for id, l := range c.leases {
			if !live[id] {
				c.drop(l)
			}
		}
	}
	for i := range active {
		if err := gs.try(&active[i]); err != nil {
			return nil, err
		}
	}
	return gs.out, nil
}

// some grants up to Max free branches, in node order from where the last
// such grant stopped, going round the frontier once at most: a worker's
// request costs the branches it passes, not the step's width. A round that
// found nothing is remembered until the file changes or a lease it passed
// runs out, so workers polling a step whose branches are all held do not
// each walk it.
func (gs *grantScan) some() ([]rollout.Lease, error) {
	c := gs.c
	if c.idle.snapshot == gs.tx.Snapshot() && gs.now.Before(c.idle.until) && c.idle.step == gs.req.Step {
		return nil, nil
	}
	if err := gs.preferred(); err != nil {
		return nil, err
	}
	until := gs.now.Add(MaxLeaseTTL)
	start, last := c.cursor, uint64(0)
	visit := func(id uint64) (bool, error) {
		n, err := gs.r.Node(id)
		if err != nil {
			return false, err
		}
		if h := c.leases[id]; h != nil {
			if free := h.expires().Add(min(LeaseGrace, h.ttl/10)); free.Before(until) {
				until = free
			}
		}
		before := len(gs.out)
		if err := gs.try(&n); err != nil {
			return false, err
		}
		if len(gs.out) > before {
			last = id
		}
		return len(gs.out) < gs.req.Max, nil
	}
	var werr error
	walk := func(from, to uint64) bool {
		more := true
		err := gs.r.FrontierFrom(from, func(id uint64) bool {
			if to != 0 && id >= to {
				return false
			}
			more, werr = visit(id)
			return more && werr == nil
		})
		if werr == nil {
			werr = err
		}
		return more && werr == nil
	}
	if walk(start, 0) && start > 0 {
		walk(0, start)
	}
	if werr != nil {
		return nil, werr
	}
	switch {
	case len(gs.out) == 0:
		c.idle = idleRound{snapshot: gs.tx.Snapshot(), until: until, step: gs.req.Step}
	case last != 0: // the round granted; preferred grants leave it where it was
		c.cursor = last + 1
	}
	return gs.out, nil
}

// preferred grants, before the round, the free branches among the newest
// MaxPrefer nodes of req.Prefer and their children.
func (gs *grantScan) preferred() error {
	prefer := gs.req.Prefer
	prefer = prefer[max(0, len(prefer)-MaxPrefer):]
	tryID := func(id uint64) error {
		n, err := gs.r.Node(id)
		if errors.Is(err, model.ErrNotFound) {
			return nil // dropped, or a node of another run's numbering
		}
		if err != nil || n.Status != model.NodeActive {
			return err
		}
		return gs.try(&n)
	}
	for i := len(prefer) - 1; i >= 0 && len(gs.out) < gs.req.Max; i-- {
		if err := tryID(prefer[i]); err != nil {
			return err
		}
		kids, err := gs.r.Children(prefer[i])
		if err != nil && !errors.Is(err, model.ErrNotFound) {
			return err
		}
		for _, k := range kids {
			if err := tryID(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// idleRound remembers a full round of the frontier that found nothing to
// grant: nothing changes before the file does or until a lease it passed
// can be handed on.
type idleRound struct {
	snapshot uint64
	until    time.Time
	step     uint64
}

// try grants n when it is a branch of the asked step that needs work and
// no one holds.
func (gs *grantScan) try(n *model.Node) error {
	c, r, req := gs.c, gs.r, gs.req
	if n.Step <= gs.info.LastStep || (req.Step != 0 && n.Step != req.Step) {
		return nil
	}
	if req.Max > 0 && len(gs.out) >= req.Max {
		return nil
	}
	g, ok := gs.groups[n.Group]
	if !ok {
		var err error
		if g, err = r.GroupAt(n.Step, n.Group); err != nil {
			return err
		}
		gs.groups[n.Group] = g
	}
	if g.Status != model.GroupOpen {
		return nil
	}
	if h := c.leases[n.ID]; h != nil && h.current(n, &g) && !h.regrantable(gs.now) && !c.voided(h, gs.info.PolicyVersion) {
		return nil
	}
	ph := c.phase(n, &g)
	if ph == routable || (ph == needScore && c.cfg.RemoteScores) {
		return nil
	}
	start := intervalStart(n, &g, c.cfg.K)
	turns := start + c.cfg.K - n.PathLen()
	if c.cfg.MaxTurns > 0 {
		turns = min(turns, c.cfg.MaxTurns-n.PathLen())
	}
	key, err := branchKeyOf(r, *n)
	if err != nil {
		return err
	}
	if h := c.leases[n.ID]; h != nil {
		c.drop(h)
	}
	ttl, now := gs.ttl, gs.now
	l := &held{Lease: rollout.Lease{
		ID: newLeaseID(), Worker: req.Worker,
		Node: n.ID, Group: g.ID, Step: g.Step, Interval: g.Interval, Attempt: n.Attempt,
		From: n.Turns, PathLen: n.PathLen(), Turns: max(turns, 0),
		Score: !c.cfg.NoScoring && !c.cfg.RemoteScores && (c.cfg.MaxTurns == 0 || start+c.cfg.K < c.cfg.MaxTurns),
		Key: rollout.TurnKey{Seed: c.cfg.Seed, Step: g.Step, Group: g.ID, Node: n.ID, Branch: key,
			Index: n.Turns, Path: n.PathLen(), Attempt: n.Attempt},
		Task: TaskOf(g), EnvState: n.EnvState, ExpiresAt: now.Add(ttl).UnixNano(), TTLMs: ttl.Milliseconds(),
		PolicyVersion: req.PolicyVersion, RunVersion: gs.info.PolicyVersion},
		ttl: ttl, snapshot: gs.tx.Snapshot(),
	}
	c.leases[n.ID], c.byID[l.ID] = l, l
	c.leaseGen++
	gs.out = append(gs.out, l.Lease)
	return nil
}

// checkLease finds the lease a submit names and checks it is the branch's
// current one, held by the submitting worker, and not voided by a version
// published since its grant.
func (c *Coordinator) checkLease(s *rollout.Submission, n *model.Node, g *model.Group, version uint64) (*held, error) {
	c.mu.Lock()
	h := c.leases[n.ID]
	var l held // a copy: renewals change the lease under the lock
	if h != nil {
		l = *h
	}
	c.mu.Unlock()
	switch {
	case h == nil || l.ID != s.Lease:
		return nil, fmt.Errorf("%w: lease %q is not node %d's current lease (it expired and was handed on, was released, or the coordinator restarted): lease again", rollout.ErrLeaseLost, s.Lease, n.ID)
	case l.Worker != s.Worker:
		return nil, fmt.Errorf("%w: lease %q of node %d was granted to worker %q, not %q", rollout.ErrNotHolder, s.Lease, n.ID, l.Worker, s.Worker)
	case !c.opts.Now().Before(l.expires()):
		return nil, fmt.Errorf("%w: lease %q of node %d expired at %s: lease again", rollout.ErrLeaseLost, s.Lease, n.ID, l.expires().Format(time.RFC3339))
	case n.Status != model.NodeActive:
		return nil, fmt.Errorf("%w: node %d is %s", rollout.ErrBranchEnded, n.ID, n.Status)
	case !l.current(n, g):
		return nil, fmt.Errorf("%w: lease %q was for interval %d attempt %d; node %d is at interval %d attempt %d", rollout.ErrLeaseLost, s.Lease, l.Interval, l.Attempt, n.ID, g.Interval, n.Attempt)
	case c.voided(&l, version):
		return nil, fmt.Errorf("%w: lease %q of node %d was granted at policy version %d; version %d was published since (on_publish abort): lease again with the new weights", rollout.ErrLeaseLost, s.Lease, n.ID, l.RunVersion, version)
	}
	return h, nil
}

// extend renews h for its TTL from now: a submit under a lease is a sign
// of life, like a heartbeat.
func (c *Coordinator) extend(h *held) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID[h.ID] == h {
		h.ExpiresAt = c.opts.Now().Add(h.ttl).UnixNano()
		c.leaseGen++
	}
}

// Renew is a worker's heartbeat: each lease it names that it still holds
// (granted to it, not expired, not voided by a published version) lasts
// its TTL from now again. The answer says, lease by lease, whether it is
// held and until when, or why it is gone; a worker drops the work of a
// lease it lost. Renew writes nothing and reads no transaction: it is
// cheap enough to send every HeartbeatEvery(TTL) for every lease held.
func (c *Coordinator) Renew(worker string, ids []string) []rollout.LeaseState {
	return c.each(worker, ids, func(h *held, now time.Time) rollout.LeaseState {
		h.ExpiresAt = now.Add(h.ttl).UnixNano()
		c.leaseGen++
		return rollout.LeaseState{ID: h.ID, Held: true, ExpiresAt: h.ExpiresAt}
	})
}

// Release gives leases back: their branches may be leased again at once
// (a worker that gives up, or one whose remote scorer takes over). The
// work already submitted under them stays.
func (c *Coordinator) Release(worker string, ids []string) []rollout.LeaseState {
	return c.each(worker, ids, func(h *held, _ time.Time) rollout.LeaseState {
		c.drop(h)
		return rollout.LeaseState{ID: h.ID, Reason: "released"}
	})
}

// each applies fn, under the table's lock, to every lease of ids that
// worker holds, and says why the others are gone.
func (c *Coordinator) each(worker string, ids []string, fn func(h *held, now time.Time) rollout.LeaseState) []rollout.LeaseState {
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]rollout.LeaseState, len(ids))
	for i, id := range ids {
		h := c.byID[id]
		switch {
		case h == nil:
			out[i] = rollout.LeaseState{ID: id, Reason: "unknown lease: it was handed on, released, or the coordinator restarted"}
		case h.Worker != worker:
			out[i] = rollout.LeaseState{ID: id, Reason: fmt.Sprintf("granted to worker %q, not %q", h.Worker, worker)}
		case !now.Before(h.expires()):
			out[i] = rollout.LeaseState{ID: id, Reason: "expired at " + h.expires().Format(time.RFC3339Nano)}
		case c.voided(h, c.version):
			out[i] = rollout.LeaseState{ID: id, Reason: fmt.Sprintf("granted at policy version %d; version %d was published since (on_publish abort)", h.RunVersion, c.version)}
		default:
			out[i] = fn(h, now)
		}
	}
	return out
}
