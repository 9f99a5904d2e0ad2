package tree

import (
	"slices"
	"sync"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Status reads the state of step's groups in tx. It starts the
// PendingTTL clock of every branch it finds waiting for a remote score
// or a deferred reward (a restarted coordinator learns of them here).
//
// A read transaction of a snapshot whose status was read before gets it
// from memory (the leases counted again): idle workers and drivers poll
// the status of a step, and reading it walks every node of its open
// groups, though nothing changes between two commits.
func (c *Coordinator) Status(tx *store.Tx, step uint64) (rollout.StepStatus, error) {
	if !tx.Writable() {
		if out, ok := c.statusMemo.get(tx.Snapshot(), step); ok {
			var err error
			out.Leased, err = c.Leased(tx, step)
			return out, err
		}
	}
	out, err := c.status(tx, step)
	if err == nil && !tx.Writable() {
		c.statusMemo.put(tx.Snapshot(), step, out)
	}
	return out, err
}

func (c *Coordinator) status(tx *store.Tx, step uint64) (rollout.StepStatus, error) {
	out := rollout.StepStatus{Step: step, Done: []uint64{}}
	r, err := c.runTx(tx)
	if err != nil {
		return out, err
	}
	if out.PolicyVersion, err = c.runVersion(r); err != nil {
		return out, err
	}
	groups, err := r.Groups(step)
	if err != nil {
		return out, err
	}
	for _, g := range groups {
		out.Groups++
		if g.Status != model.GroupOpen {
			out.Closed++
			continue
		}
		out.Open++
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return out, err
		}
		waiting, rewards := groupWaits(nodes)
		for i := range nodes {
			n := &nodes[i]
			switch {
			case n.Status == model.NodeActive:
				out.Active++
				if c.awaitsScore(n, &g) {
					out.AwaitingScores++
					c.pendingSince(n.ID)
				}
			case n.AwaitsReward():
				c.pendingSince(n.ID)
			}
		}
		out.AwaitingRewards += rewards
		if !waiting {
			out.Done = append(out.Done, g.ID)
		}
	}
	out.Leased, err = c.Leased(tx, step)
	return out, err
}

// statusMemo keeps the last status read of a few steps with the snapshot
// it was read in.
type statusMemo struct {
	mu    sync.Mutex
	steps map[uint64]memoStatus
}

type memoStatus struct {
	snapshot uint64
	out      rollout.StepStatus
}

// memoSteps bounds the steps remembered: a driver polls one step, a
// viewer a few.
const memoSteps = 8

func (m *statusMemo) get(snapshot, step uint64) (rollout.StepStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.steps[step]
	if !ok || e.snapshot != snapshot {
		return rollout.StepStatus{}, false
	}
	out := e.out
	out.Done = slices.Clone(e.out.Done)
	return out, true
}

func (m *statusMemo) put(snapshot, step uint64, out rollout.StepStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.steps == nil || len(m.steps) >= memoSteps {
		m.steps = map[uint64]memoStatus{}
	}
	out.Done = slices.Clone(out.Done)
	m.steps[step] = memoStatus{snapshot: snapshot, out: out}
}
