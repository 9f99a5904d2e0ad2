package tree

import (
	"context"
	"fmt"
	"sort"

	"github.com/patrdb/patrdb/store"
)

// branch is an active node being advanced in memory.
type branch struct {
	node    store.Node
	history []store.Turn // the full path, inherited prefix included
	ep      Episode
	start   int // path length when the current interval began
	pending []store.Turn
	reward  float64 // sum of env rewards along the path
	done    bool
	status  store.NodeStatus // completed or truncated once done
}

func (b *branch) pathLen() int { return len(b.history) }

// pendingFrom is the own-turn index of the first uncommitted turn.
func (b *branch) pendingFrom() int { return b.node.Turns - len(b.pending) }

type groupState struct {
	g        store.Group
	task     Task
	branches []*branch // active, in node id order
}

func taskOf(g store.Group) Task {
	return Task{ID: g.Task, Prompt: g.Prompt, Gold: g.Gold, Meta: g.Meta}
}

// load rebuilds the open groups of step and their active branches from the
// store: the same path serves a fresh rollout and a resume.
func (e *Engine) load(ctx context.Context, step uint64) ([]*groupState, error) {
	var groups []*groupState
	type active struct {
		node store.Node
		hist []store.Turn
	}
	byGroup := map[uint64][]active{}
	err := e.db.View(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		gs, err := r.Groups(step)
		if err != nil {
			return err
		}
		for _, g := range gs {
			if g.Status == store.GroupOpen {
				groups = append(groups, &groupState{g: g, task: taskOf(g)})
			}
		}
		nodes, err := r.FrontierNodes()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.Step != step {
				continue
			}
			path, err := r.Trajectory(n.ID)
			if err != nil {
				return err
			}
			hist := make([]store.Turn, len(path))
			for i := range path {
				hist[i] = path[i].Turn
			}
			byGroup[n.Group] = append(byGroup[n.Group], active{n, hist})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cfg := e.opts.Config
	for _, gs := range groups {
		for _, a := range byGroup[gs.g.ID] {
			// start is the path length when the current interval began: the
			// last score for a routed branch; for one never scored, its fork
			// point, or for a root under NoScoring (which is never scored)
			// K turns per committed interval, as every interval advances a
			// branch that is not done by exactly K.
			b := &branch{node: a.node, history: a.hist, start: a.node.Base}
			if k := len(a.node.Scores); k > 0 {
				b.start = a.node.Scores[k-1].Turn
			} else if a.node.Parent == 0 {
				b.start = min(gs.g.Interval*cfg.K, len(a.hist))
			}
			for _, t := range a.hist {
				b.reward += t.Reward
			}
			// Under CommitTurn the branch may have ended after the last
			// committed interval; finish it instead of stepping a finished
			// episode.
			n := len(a.hist)
			switch {
			case n > 0 && a.hist[n-1].Done:
				b.done, b.status = true, store.NodeCompleted
			case cfg.MaxTurns > 0 && n >= cfg.MaxTurns:
				b.done, b.status = true, store.NodeTruncated
			}
			if !b.done {
				if b.ep, err = e.restore(ctx, gs.task, a.hist, a.node.EnvState); err != nil {
					return nil, err
				}
			}
			gs.branches = append(gs.branches, b)
		}
		sort.Slice(gs.branches, func(i, j int) bool { return gs.branches[i].node.ID < gs.branches[j].node.ID })
	}
	return groups, nil
}

func (e *Engine) restore(ctx context.Context, task Task, hist []store.Turn, state []byte) (Episode, error) {
	if len(hist) == 0 && state == nil {
		return e.opts.Env.Reset(ctx, task)
	}
	return e.opts.Env.Restore(ctx, task, hist, state)
}

// drive advances every open group of step interval by interval until all
// are closed.
func (e *Engine) drive(ctx context.Context, step uint64) (*StepResult, error) {
	groups, err := e.load(ctx, step)
	if err != nil {
		return nil, err
	}
	res := &StepResult{Step: step}
	for {
		if err := e.closeFinished(ctx, step, &groups, res); err != nil {
			return nil, err
		}
		if len(groups) == 0 {
			break
		}
		n, err := e.advance(ctx, step, groups)
		res.EnvSteps += n
		if err != nil {
			return nil, err
		}
		interval := groups[0].g.Interval
		if err := e.commitInterval(ctx, step, groups); err != nil {
			return nil, err
		}
		if e.opts.OnInterval != nil {
			e.opts.OnInterval(step, interval, n)
		}
	}
	sort.Slice(res.Groups, func(i, j int) bool { return res.Groups[i].Group.ID < res.Groups[j].Group.ID })
	return res, nil
}

// advance samples up to K turns on every active branch, committing after
// each round of turns under CommitTurn.
func (e *Engine) advance(ctx context.Context, step uint64, groups []*groupState) (int, error) {
	cfg := e.opts.Config
	sampled := 0
	for round := 0; round < cfg.K; round++ {
		progressed := false
		for _, gs := range groups {
			for _, b := range gs.branches {
				if b.done || b.pathLen()-b.start >= cfg.K {
					continue
				}
				if err := ctx.Err(); err != nil {
					return sampled, err
				}
				if err := e.sampleTurn(ctx, step, gs, b); err != nil {
					return sampled, err
				}
				sampled++
				progressed = true
			}
		}
		if !progressed {
			break
		}
		if e.opts.Commit == CommitTurn {
			if err := e.db.Update(func(tx *store.Tx) error {
				r, err := tx.Run(e.run)
				if err != nil {
					return err
				}
				return flushTurns(r, groups)
			}); err != nil {
				return sampled, err
			}
		}
	}
	return sampled, nil
}

func (e *Engine) sampleTurn(ctx context.Context, step uint64, gs *groupState, b *branch) error {
	key := TurnKey{Seed: e.opts.Config.Seed, Step: step, Group: gs.g.ID, Node: b.node.ID, Index: b.node.Turns, Path: b.pathLen()}
	a, err := e.opts.Policy.Act(ctx, key, gs.task, b.history)
	if err != nil {
		return fmt.Errorf("tree: policy at node %d turn %d: %w", b.node.ID, key.Index, err)
	}
	obs, err := b.ep.Step(ctx, key, a)
	if err != nil {
		return fmt.Errorf("tree: env at node %d turn %d: %w", b.node.ID, key.Index, err)
	}
	t := store.Turn{Action: a.Text, ActionTokens: a.Tokens, ActionLogprobs: a.Logprobs,
		Observation: obs.Text, ObservationTokens: obs.Tokens, Reward: obs.Reward, Done: obs.Done}
	b.history = append(b.history, t)
	b.pending = append(b.pending, t)
	b.node.Turns++
	b.reward += obs.Reward
	switch {
	case obs.Done:
		b.done, b.status = true, store.NodeCompleted
	case e.opts.Config.MaxTurns > 0 && b.pathLen() >= e.opts.Config.MaxTurns:
		b.done, b.status = true, store.NodeTruncated
	}
	return nil
}

// flushTurns writes every branch's uncommitted turns, with the env state
// after them when the env gives one, so the state on a node always matches
// its stored turns (a resume restores from both).
func flushTurns(r *store.RunTx, groups []*groupState) error {
	for _, gs := range groups {
		for _, b := range gs.branches {
			if len(b.pending) == 0 {
				continue
			}
			if err := r.AppendTurns(b.node.ID, b.pendingFrom(), b.pending...); err != nil {
				return err
			}
			if st := b.ep.State(); st != nil {
				if err := r.SetEnvState(b.node.ID, st); err != nil {
					return err
				}
			}
		}
	}
	for _, gs := range groups {
		for _, b := range gs.branches {
			b.pending = b.pending[:0]
		}
	}
	return nil
}

// repeatRun counts identical actions at the end of a history.
func repeatRun(hist []store.Turn) int {
	n := 0
	for i := len(hist) - 1; i >= 0 && hist[i].Action == hist[len(hist)-1].Action; i-- {
		n++
	}
	return n
}
