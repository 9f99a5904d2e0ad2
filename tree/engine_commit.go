package tree

import (
	"context"
	"fmt"
	"sort"

	"github.com/patrdb/patrdb/store"
)

// routed is the outcome of routing one group at the end of an interval.
type routed struct {
	scores    map[uint64]float64
	decisions []Decision
}

// commitInterval scores and routes every group's surviving branches and
// commits the interval's turns, scores, decisions, finished leaves and new
// children in one transaction for the whole batch.
func (e *Engine) commitInterval(ctx context.Context, step uint64, groups []*groupState) error {
	cfg := e.opts.Config
	plans := make([]routed, len(groups))
	for gi, gs := range groups {
		if cfg.NoScoring {
			continue
		}
		var in []Branch
		plans[gi].scores = map[uint64]float64{}
		for _, b := range gs.branches {
			if b.done {
				continue
			}
			s, err := e.opts.Scorer.Score(ctx, gs.task, b.history)
			if err != nil {
				return fmt.Errorf("tree: scorer at node %d: %w", b.node.ID, err)
			}
			if !(s >= 0 && s <= 1) {
				return fmt.Errorf("%w: scorer returned %v for node %d, want [0,1]", store.ErrInvalid, s, b.node.ID)
			}
			plans[gi].scores[b.node.ID] = s
			in = append(in, Branch{Node: b.node.ID, Score: s, RepeatRun: repeatRun(b.history)})
		}
		plans[gi].decisions = Route(in, cfg)
	}

	children := make([][]store.Node, len(groups)) // new nodes per group, in creation order
	err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		if err := flushTurns(r, groups); err != nil {
			return err
		}
		for gi, gs := range groups {
			children[gi] = nil
			interval := gs.g.Interval
			for _, b := range gs.branches {
				if !b.done {
					continue
				}
				if err := r.SetReward(b.node.ID, b.reward); err != nil {
					return err
				}
				if err := r.SetNodeStatus(b.node.ID, b.status); err != nil {
					return err
				}
			}
			byID := map[uint64]*branch{}
			for _, b := range gs.branches {
				byID[b.node.ID] = b
			}
			for _, d := range plans[gi].decisions {
				b := byID[d.Node]
				if err := r.Score(b.node.ID, store.Score{Interval: interval, Turn: b.pathLen(), Value: plans[gi].scores[b.node.ID]}); err != nil {
					return err
				}
				if err := r.Route(b.node.ID, store.Decision{Interval: interval, Action: string(d.Action), Score: d.Score,
					Reference: d.Reference, Delta: d.Delta, Rule: d.Rule, Children: d.Children}); err != nil {
					return err
				}
				switch d.Action {
				case Prune:
					if err := r.SetReward(b.node.ID, b.reward); err != nil {
						return err
					}
				case Expand:
					state := b.ep.State()
					for i := 0; i < d.Children; i++ {
						c, err := r.AddNode(store.NodeSpec{Step: step, Group: gs.g.ID, Parent: b.node.ID,
							Fork: b.node.Turns, Ordinal: i, EnvState: state})
						if err != nil {
							return err
						}
						children[gi] = append(children[gi], c)
					}
				}
			}
			if err := r.SetGroupInterval(step, gs.g.ID, interval+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return e.afterCommit(ctx, groups, plans, children)
}

// afterCommit moves the in-memory branches to the state just committed.
func (e *Engine) afterCommit(ctx context.Context, groups []*groupState, plans []routed, children [][]store.Node) error {
	for gi, gs := range groups {
		gs.g.Interval++
		decided := map[uint64]Action{}
		for _, d := range plans[gi].decisions {
			decided[d.Node] = d.Action
		}
		var next []*branch
		kids := children[gi]
		for _, b := range gs.branches {
			if b.done {
				continue
			}
			switch decided[b.node.ID] {
			case Prune:
				continue
			case Expand:
				for len(kids) > 0 && kids[0].Parent == b.node.ID {
					c := kids[0]
					kids = kids[1:]
					hist := append([]store.Turn(nil), b.history...)
					ep, err := e.opts.Env.Restore(ctx, gs.task, hist, c.EnvState)
					if err != nil {
						return fmt.Errorf("tree: restoring child %d: %w", c.ID, err)
					}
					next = append(next, &branch{node: c, history: hist, ep: ep, start: len(hist), reward: b.reward})
				}
				continue
			}
			b.start = b.pathLen()
			next = append(next, b)
		}
		// Keep node id order, the order load rebuilds after a crash: it
		// decides the order of the next interval's writes and so the ids
		// of the children it creates.
		sort.Slice(next, func(i, j int) bool { return next[i].node.ID < next[j].node.ID })
		gs.branches = next
	}
	return nil
}

// closeFinished closes every group without active branches: rubric shaping
// (if any) is prepared outside the transaction, then the shaping's writes,
// the advantages and the close commit together.
func (e *Engine) closeFinished(ctx context.Context, step uint64, groups *[]*groupState, res *StepResult) error {
	var open []*groupState
	for _, gs := range *groups {
		if len(gs.branches) > 0 {
			open = append(open, gs)
			continue
		}
		gr, err := e.closeGroup(ctx, step, gs.g)
		if err != nil {
			return err
		}
		res.Groups = append(res.Groups, gr)
	}
	*groups = open
	return nil
}

func (e *Engine) closeGroup(ctx context.Context, step uint64, g store.Group) (GroupResult, error) {
	var leaves []Leaf
	err := e.db.View(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if !n.Status.Leaf() {
				continue
			}
			l := Leaf{Node: n, Reward: n.Reward}
			if e.opts.Shaper != nil {
				if l.Turns, err = r.Trajectory(n.ID); err != nil {
					return err
				}
			}
			leaves = append(leaves, l)
		}
		return nil
	})
	if err != nil {
		return GroupResult{}, err
	}
	sortLeaves(leaves)
	var shaping *Shaping
	if e.opts.Shaper != nil && len(leaves) > 0 {
		if shaping, err = e.opts.Shaper.Prepare(ctx, step, g, leaves); err != nil {
			return GroupResult{}, fmt.Errorf("tree: shaping group %d: %w", g.ID, err)
		}
		if shaping != nil && len(shaping.Scores) != len(leaves) {
			return GroupResult{}, fmt.Errorf("%w: shaper gave %d scores for %d leaves", store.ErrInvalid, len(shaping.Scores), len(leaves))
		}
	}
	advs := Advantages(g, leaves, shaping, e.opts.Eps)
	gr := GroupResult{Group: g, Advantages: advs}
	for _, l := range leaves {
		gr.Leaves = append(gr.Leaves, l.Node)
	}
	err = e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		if shaping != nil && shaping.Apply != nil {
			if err := shaping.Apply(r); err != nil {
				return err
			}
		}
		for _, a := range advs {
			if err := r.PutAdvantage(a); err != nil {
				return err
			}
		}
		return r.CloseGroup(step, g.ID)
	})
	gr.Group.Status = store.GroupClosed
	return gr, err
}

func sortLeaves(ls []Leaf) {
	for i := 1; i < len(ls); i++ {
		for j := i; j > 0 && ls[j].Node.ID < ls[j-1].Node.ID; j-- {
			ls[j], ls[j-1] = ls[j-1], ls[j]
		}
	}
}

// Advantages computes a group's advantage records: GRPO over the outcome
// rewards, or over R = R_base + λ·score when a shaping is given. The
// zero-variance flags are taken before and after shaping.
func Advantages(g store.Group, leaves []Leaf, shaping *Shaping, eps float64) []store.Advantage {
	base := make([]float64, len(leaves))
	for i, l := range leaves {
		base[i] = l.Reward
	}
	_, _, _, zvBefore := GRPOAdvantages(base, eps)
	total := append([]float64(nil), base...)
	var lambda float64
	var rubrics []uint64
	if shaping != nil {
		lambda, rubrics = shaping.Lambda, shaping.Rubrics
		for i := range total {
			total[i] += lambda * shaping.Scores[i]
		}
	}
	adv, mean, std, zvAfter := GRPOAdvantages(total, eps)
	out := make([]store.Advantage, len(leaves))
	for i, l := range leaves {
		var score float64
		if shaping != nil {
			score = shaping.Scores[i]
		}
		out[i] = store.Advantage{Step: g.Step, Group: g.ID, Leaf: l.Node.ID, Outcome: base[i], RubricScore: score,
			Lambda: lambda, Total: total[i], Mean: mean, Std: std, Advantage: adv[i], Rubrics: rubrics,
			ZeroVariance: zvBefore, ZeroVarianceAfter: zvAfter}
	}
	return out
}
