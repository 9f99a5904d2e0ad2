package tree

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Lease is package rollout's.
type Lease = rollout.Lease

// held is a granted lease as the coordinator keeps it.
type held struct {
	Lease
	ttl      time.Duration
	snapshot uint64 // the store snapshot the grant was judged on
}

// LeaseRequest asks for up to Max branches (0: every branch available).
type LeaseRequest struct {
	Worker string
	Max    int
	Step   uint64        // 0: any open step past the run's last completed one
	TTL    time.Duration // 0: the coordinator's LeaseTTL
}

// current reports whether l is still the lease of its branch as the store
// stands: the branch is active, in the same attempt, and its group in the
// same interval. A lease that is no longer current is free to hand on.
func (l *held) current(n *store.Node, g *store.Group) bool {
	return n.Status == store.NodeActive && n.Attempt == l.Attempt && g.Status == store.GroupOpen && g.Interval == l.Interval
}

// Lease hands out up to req.Max branches that need work — turns or a score
// in their group's current interval — and that no other worker holds: never
// leased, or whose lease expired (a grace period past its expiry, see
// LeaseGrace) or is no longer current. Branches come in step, group and node
// order. A lease is not a write: Lease reads the store in a snapshot of its
// own, and no grant is ever judged on a snapshot older than the one an
// earlier grant saw (a snapshot that lost that race is retaken), so a lease
// never describes a state its branch has already left. then, when not nil,
// runs in that same snapshot with the grants (to read the leased branches'
// histories, say) after the table is released.
func (c *Coordinator) Lease(req LeaseRequest, then func(tx *store.Tx, leases []Lease) error) ([]Lease, error) {
	for {
		var out []Lease
		err := c.db.View(func(tx *store.Tx) error {
			var err error
			if out, err = c.grant(tx, req); err != nil || then == nil {
				return err
			}
			return then(tx, out)
		})
		if errors.Is(err, errStaleSnapshot) {
			continue
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

func (c *Coordinator) grant(tx *store.Tx, req LeaseRequest) ([]Lease, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tx.Snapshot() < c.granted {
		return nil, errStaleSnapshot
	}
	c.granted = tx.Snapshot()
	if req.Max < 0 {
		return nil, fmt.Errorf("%w: max %d is negative", store.ErrInvalid, req.Max)
	}
	ttl := req.TTL
	if ttl <= 0 {
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
	now := c.opts.Now()
	if req.Step == 0 {
		// Forget the leases of branches that are no longer active, so the
		// table stays the size of the frontier.
		live := make(map[uint64]bool, len(active))
		for i := range active {
			live[active[i].ID] = true
		}
		for id := range c.leases {
			if !live[id] {
				delete(c.leases, id)
			}
		}
	}
	var out []Lease
	groups := map[uint64]store.Group{}
	for i := range active {
		n := &active[i]
		if n.Step <= info.LastStep || (req.Step != 0 && n.Step != req.Step) {
			continue
		}
		if req.Max > 0 && len(out) >= req.Max {
			break
		}
		g, ok := groups[n.Group]
		if !ok {
			if g, err = r.GroupAt(n.Step, n.Group); err != nil {
				return nil, err
			}
			groups[n.Group] = g
		}
		if g.Status != store.GroupOpen {
			continue
		}
		if held := c.leases[n.ID]; held != nil && held.current(n, &g) && !held.regrantable(now) {
			continue
		}
		ph := c.phase(n, &g)
		if ph == routable {
			continue
		}
		start := intervalStart(n, &g, c.cfg.K)
		turns := start + c.cfg.K - n.PathLen()
		if c.cfg.MaxTurns > 0 {
			turns = min(turns, c.cfg.MaxTurns-n.PathLen())
		}
		key, err := branchKeyOf(r, *n)
		if err != nil {
			return nil, err
		}
		c.seq++
		l := held{Lease: Lease{
			ID: fmt.Sprintf("%s-%d", c.instance, c.seq), Worker: req.Worker,
			Node: n.ID, Group: g.ID, Step: g.Step, Interval: g.Interval, Attempt: n.Attempt,
			From: n.Turns, PathLen: n.PathLen(), Turns: max(turns, 0),
			Score: !c.cfg.NoScoring && (c.cfg.MaxTurns == 0 || start+c.cfg.K < c.cfg.MaxTurns),
			Key: TurnKey{Seed: c.cfg.Seed, Step: g.Step, Group: g.ID, Node: n.ID, Branch: key,
				Index: n.Turns, Path: n.PathLen(), Attempt: n.Attempt},
			Task: TaskOf(g), EnvState: n.EnvState, ExpiresAt: now.Add(ttl).UnixNano()},
			ttl: ttl, snapshot: tx.Snapshot(),
		}
		c.leases[n.ID] = &l
		out = append(out, l.Lease)
	}
	return out, nil
}

// checkLease finds the lease a submit names and checks it is the branch's
// current one.
func (c *Coordinator) checkLease(id string, n *store.Node, g *store.Group) (*held, error) {
	c.mu.Lock()
	held := c.leases[n.ID]
	c.mu.Unlock()
	switch {
	case held == nil || held.ID != id:
		return nil, fmt.Errorf("%w: lease %q is not node %d's current lease (it expired and was handed on, or the coordinator restarted): lease again", ErrLeaseLost, id, n.ID)
	case !c.opts.Now().Before(held.expires()):
		return nil, fmt.Errorf("%w: lease %q of node %d expired at %s: lease again", ErrLeaseLost, id, n.ID, held.expires().Format(time.RFC3339))
	case n.Status != store.NodeActive:
		return nil, fmt.Errorf("%w: node %d is %s", ErrBranchEnded, n.ID, n.Status)
	case !held.current(n, g):
		return nil, fmt.Errorf("%w: lease %q was for interval %d attempt %d; node %d is at interval %d attempt %d", ErrLeaseLost, id, held.Interval, held.Attempt, n.ID, g.Interval, n.Attempt)
	}
	return held, nil
}
