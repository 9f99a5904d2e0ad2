package tree

import (
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Status reads the state of step's groups in tx. It starts the
// PendingTTL clock of every branch it finds waiting for a remote score
// or a deferred reward (a restarted coordinator learns of them here).
func (c *Coordinator) Status(tx *store.Tx, step uint64) (rollout.StepStatus, error) {
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
