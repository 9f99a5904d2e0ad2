package tree

import (
	"fmt"
	"sort"

	"github.com/patrdb/patrdb/grpo"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Leaves reads the leaves of a group — completed, truncated and pruned
// branches, never failed ones — in node id order, each with its outcome
// reward, and with its trajectory when withTurns (a Shaper reads them).
// A group with an active branch is ErrConflict.
func (c *Coordinator) Leaves(tx *store.Tx, step, group uint64, withTurns bool) (model.Group, []Leaf, error) {
	r, err := c.runTx(tx)
	if err != nil {
		return model.Group{}, nil, err
	}
	g, err := r.GroupAt(step, group)
	if err != nil {
		return g, nil, err
	}
	nodes, err := r.GroupNodes(g)
	if err != nil {
		return g, nil, err
	}
	var leaves []Leaf
	for _, n := range nodes {
		switch {
		case n.Status == model.NodeActive:
			return g, nil, fmt.Errorf("%w: group %d still has active branch %d", rollout.ErrConflict, g.ID, n.ID)
		case n.AwaitsReward():
			return g, nil, fmt.Errorf("%w: leaf %d of group %d awaits its deferred reward", rollout.ErrConflict, n.ID, g.ID)
		case !n.Status.Leaf():
			continue
		case !n.HasReward:
			return g, nil, fmt.Errorf("%w: leaf %d of group %d has no reward", store.ErrCorrupt, n.ID, g.ID)
		}
		l := Leaf{Node: n, Reward: n.Reward}
		if withTurns {
			if l.Turns, err = r.Trajectory(n.ID); err != nil {
				return g, nil, err
			}
		}
		leaves = append(leaves, l)
	}
	sort.Slice(leaves, func(i, j int) bool { return leaves[i].Node.ID < leaves[j].Node.ID })
	return g, leaves, nil
}

// Close closes a group without active branches: GRPO advantages over its
// leaves (on R = reward + Lambda·score with a shaping, whose writes apply
// in the same transaction), then the group's close. A shaping that breaks
// its rules (shaping.go) is ErrInvalidShaping, checked before the group is
// read; a closed group is ErrConflict.
func (c *Coordinator) Close(tx *store.Tx, step, group uint64, shaping *Shaping, eps float64) (GroupResult, error) {
	if eps == 0 {
		eps = grpo.DefaultEps
	}
	if !grpo.ValidEps(eps) {
		return GroupResult{}, fmt.Errorf("%w: GRPO eps %v, want a finite value >= 0", ErrInvalidConfig, eps)
	}
	if shaping != nil {
		if err := shaping.check(group); err != nil {
			return GroupResult{}, err
		}
	}
	g, leaves, err := c.Leaves(tx, step, group, false)
	if err != nil {
		return GroupResult{}, err
	}
	if g.Status != model.GroupOpen {
		return GroupResult{}, fmt.Errorf("%w: group %d is %s", rollout.ErrConflict, g.ID, g.Status)
	}
	if shaping != nil {
		scores, err := shaping.aligned(g.ID, leaves)
		if err != nil {
			return GroupResult{}, err
		}
		aligned := *shaping
		aligned.Scores, aligned.Leaf = scores, nil
		shaping = &aligned
	}
	r, err := c.runTx(tx)
	if err != nil {
		return GroupResult{}, err
	}
	if shaping != nil && shaping.Apply != nil {
		if err := shaping.Apply(r); err != nil {
			return GroupResult{}, err
		}
	}
	advs := Advantages(g, leaves, shaping, eps)
	for _, a := range advs {
		if err := r.PutAdvantage(a); err != nil {
			return GroupResult{}, err
		}
	}
	if err := r.CloseGroup(g.Step, g.ID); err != nil {
		return GroupResult{}, err
	}
	g.Status = model.GroupClosed
	gr := GroupResult{Group: g, Advantages: advs}
	for _, l := range leaves {
		gr.Leaves = append(gr.Leaves, l.Node)
	}
	return gr, nil
}

// EvStepAbandon is the event that records a step given up by Abandon.
const EvStepAbandon model.EventKind = "step.abandon"

// Abandon gives up the open groups of step, on record: every active branch
// becomes failed with "abandoned: reason", every open group closes without
// advantages, and an EvStepAbandon event holds the reason. A checkpoint can
// then complete the step.
func (c *Coordinator) Abandon(tx *store.Tx, step uint64, reason string) error {
	if reason == "" {
		return fmt.Errorf("%w: abandoning step %d needs a reason", model.ErrInvalid, step)
	}
	r, err := c.runTx(tx)
	if err != nil {
		return err
	}
	groups, err := r.Groups(step)
	if err != nil {
		return err
	}
	if len(groups) == 0 {
		return fmt.Errorf("%w: step %d of run %q has no groups to abandon", model.ErrNotFound, step, c.run)
	}
	for _, g := range groups {
		if g.Status != model.GroupOpen {
			continue
		}
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Status == model.NodeActive || n.AwaitsReward() {
				if err := r.FailNode(n.ID, "abandoned: "+reason); err != nil {
					return err
				}
			}
		}
		if err := r.CloseGroup(g.Step, g.ID); err != nil {
			return err
		}
	}
	_, err = r.AppendEvent(EvStepAbandon, step, 0, 0, 0, map[string]string{"reason": reason})
	return err
}
