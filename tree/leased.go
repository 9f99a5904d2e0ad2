package tree

import (
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Leased counts the branches of step (0: every step) that a worker holds
// right now: under a lease that has not expired and is still current as
// the store stands in tx. A driver waiting for a step reads it beside the
// store's counts to tell "workers are busy" from "nobody is working".
//
// Idle workers poll the status, and so this count, many times between two
// changes of the store or the lease table: a read transaction gets the
// last count while its snapshot, the table and the step are the same and
// none of the leases it counted has run out since.
func (c *Coordinator) Leased(tx *store.Tx, step uint64) (int, error) {
	now := c.opts.Now()
	c.mu.Lock()
	if m := c.leased; m.ok && !tx.Writable() && m.snapshot == tx.Snapshot() && m.step == step && m.gen == c.leaseGen && now.Before(m.until) {
		c.mu.Unlock()
		return m.count, nil
	}
	gen, until := c.leaseGen, now.Add(MaxLeaseTTL)
	live := make([]held, 0, len(c.leases))
	for _, l := range c.leases {
		if (step == 0 || l.Step == step) && now.Before(l.expires()) {
			live = append(live, *l)
			if e := l.expires(); e.Before(until) {
				until = e
			}
		}
	}
	c.mu.Unlock()
	r, err := c.runTx(tx)
	if err != nil {
		return 0, err
	}
	count := 0
	groups := map[uint64]model.Group{}
	for i := range live {
		if live[i].snapshot > tx.Snapshot() {
			// Granted on a newer state than tx sees (its branch may not
			// even exist in tx): current then, and only a grant or a
			// submit, never a reader, moves a lease on.
			count++
			continue
		}
		n, err := r.Node(live[i].Node)
		if err != nil {
			return 0, err
		}
		g, ok := groups[n.Group] // leases share groups: each is read once
		if !ok {
			if g, err = r.GroupAt(n.Step, n.Group); err != nil {
				return 0, err
			}
			groups[n.Group] = g
		}
		if live[i].current(&n, &g) {
			count++
		}
	}
	if !tx.Writable() {
		c.mu.Lock()
		if c.leaseGen == gen {
			c.leased = leasedMemo{ok: true, snapshot: tx.Snapshot(), step: step, gen: gen, until: until, count: count}
		}
		c.mu.Unlock()
	}
	return count, nil
}

// leasedMemo is a count Leased made: of step's leases in snapshot, with
// the lease table at gen, good until the first lease it counted runs out.
type leasedMemo struct {
	ok                  bool
	snapshot, step, gen uint64
	until               time.Time
	count               int
}
