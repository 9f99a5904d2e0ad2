package tree

import (
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// StepStatus is package rollout's.
type StepStatus = rollout.StepStatus

// Status reads the state of step's groups in tx.
func (c *Coordinator) Status(tx *store.Tx, step uint64) (StepStatus, error) {
	out := StepStatus{Step: step, Done: []uint64{}}
	r, err := c.runTx(tx)
	if err != nil {
		return out, err
	}
	groups, err := r.Groups(step)
	if err != nil {
		return out, err
	}
	for _, g := range groups {
		out.Groups++
		if g.Status != store.GroupOpen {
			out.Closed++
			continue
		}
		out.Open++
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return out, err
		}
		active := 0
		for _, n := range nodes {
			if n.Status == store.NodeActive {
				active++
			}
		}
		if active == 0 {
			out.Done = append(out.Done, g.ID)
		}
		out.Active += active
	}
	out.Leased, err = c.Leased(tx, step)
	return out, err
}
