package tree

import (
	"fmt"
	"slices"
	"sort"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// encodeTurns validates and encodes s's turns (store.EncodeTurns). Done
// before the write transaction, it takes the turns' checks and encoding,
// most of the CPU an append of large turns costs, out of the single
// writer's critical section.
func encodeTurns(s *rollout.Submission) (store.EncodedTurns, error) {
	if len(s.Turns) == 0 {
		return store.EncodedTurns{}, nil
	}
	return store.EncodeTurns(s.Turns...)
}

// EncodeSubmissions validates and encodes every submission's turns, for
// SubmitEncoded. Writers call it before the transaction that submits
// them: Submit encodes them inside the transaction, while every other
// writer waits.
func EncodeSubmissions(subs []rollout.Submission) ([]store.EncodedTurns, error) {
	enc := make([]store.EncodedTurns, len(subs))
	for i := range subs {
		var err error
		if enc[i], err = encodeTurns(&subs[i]); err != nil {
			return nil, fmt.Errorf("submission %d (node %d): %w", i, subs[i].Node, err)
		}
	}
	return enc, nil
}

// Submit applies submissions in order inside tx, then routes every group
// whose current interval they completed (all its active branches scored,
// or, under NoScoring, K turns in), in group order. Any refusal returns
// its error; the caller's transaction must then roll back (the store's
// write methods poison it, so Update does), and nothing is written.
func (c *Coordinator) Submit(tx *store.Tx, subs []rollout.Submission) (*rollout.Submitted, error) {
	return c.SubmitEncoded(tx, subs, nil)
}

// SubmitEncoded is Submit given the submissions' turns encoded ahead:
// enc[i] holds subs[i].Turns (EncodeSubmissions), which still describe
// them (their count, Done flags and rewards). A nil enc, or an empty
// entry, encodes inside the transaction.
func (c *Coordinator) SubmitEncoded(tx *store.Tx, subs []rollout.Submission, enc []store.EncodedTurns) (*rollout.Submitted, error) {
	if enc != nil && len(enc) != len(subs) {
		return nil, fmt.Errorf("%w: %d encoded turn lists for %d submissions", model.ErrInvalid, len(enc), len(subs))
	}
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	version, err := c.runVersion(r)
	if err != nil {
		return nil, err
	}
	out := &rollout.Submitted{Results: make([]rollout.SubmitResult, 0, len(subs))}
	touched := groupSet{}
	for i := range subs {
		var e store.EncodedTurns
		if enc != nil {
			e = enc[i]
		}
		res, g, err := c.submitOne(r, &subs[i], e, version)
		if err != nil {
			return nil, fmt.Errorf("submission %d (node %d): %w", i, subs[i].Node, err)
		}
		out.Results = append(out.Results, res)
		touched[g.ID] = g.Step
	}
	return out, c.settleGroups(r, touched, out)
}

// groupSet is the groups a request touched: group id → step.
type groupSet map[uint64]uint64

// ids are the set's groups in id order.
func (gs groupSet) ids() []uint64 {
	ids := make([]uint64, 0, len(gs))
	for id := range gs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// settleGroups routes, in group order, every touched group whose current
// interval is complete, and lists in out.Done those left with no active
// branch and no leaf awaiting its reward.
func (c *Coordinator) settleGroups(r *store.RunTx, touched groupSet, out *rollout.Submitted) error {
	for _, id := range touched.ids() {
		routed, done, err := c.routeIfComplete(r, touched[id], id)
		if err != nil {
			return err
		}
		if routed != nil {
			out.Routed = append(out.Routed, *routed)
		}
		if done {
			out.Done = append(out.Done, id)
		}
	}
	return nil
}

// runVersion reads the run's current policy version and remembers it.
func (c *Coordinator) runVersion(r *store.RunTx) (uint64, error) {
	info, err := r.Info()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.noteVersion(info.PolicyVersion)
	c.mu.Unlock()
	return info.PolicyVersion, nil
}

func (c *Coordinator) submitOne(r *store.RunTx, s *rollout.Submission, enc store.EncodedTurns, version uint64) (rollout.SubmitResult, model.Group, error) {
	n, err := r.Node(s.Node)
	if err != nil {
		return rollout.SubmitResult{}, model.Group{}, err
	}
	g, err := r.GroupAt(n.Step, n.Group)
	if err != nil {
		return rollout.SubmitResult{}, g, err
	}
	h, err := c.checkLease(s, &n, &g, version)
	if err != nil {
		return rollout.SubmitResult{}, g, err
	}
	if s.Error != "" {
		if len(s.Turns) > 0 || s.Score != nil || s.Reward != nil || s.RewardPending {
			return rollout.SubmitResult{}, g, fmt.Errorf("%w: a failure report carries no turns, score or reward", model.ErrInvalid)
		}
		return c.fail(r, n, g, s.Error)
	}
	for i := range s.Turns {
		if v := s.Turns[i].PolicyVersion; c.cfg.StaleBy(version, v) {
			return rollout.SubmitResult{}, g, fmt.Errorf("%w: turn %d was sampled by policy version %d, %d behind run %q's version %d (max_staleness %d)",
				rollout.ErrStale, i, v, version-v, c.run, version, c.cfg.MaxStaleness)
		}
	}
	if enc.Len() > 0 && enc.Len() != len(s.Turns) {
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: %d encoded turns describe %d turns", model.ErrInvalid, enc.Len(), len(s.Turns))
	}
	if s.From != n.Turns {
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: from %d, but node %d has %d turns stored: resubmit from %d", rollout.ErrLeaseLost, s.From, n.ID, n.Turns, n.Turns)
	}
	start := intervalStart(&n, &g, c.cfg.K)
	after := n.PathLen() + len(s.Turns)
	if after > start+c.cfg.K {
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: %d turns would take node %d to %d turns into interval %d; K is %d", rollout.ErrConflict, len(s.Turns), n.ID, after-start, g.Interval, c.cfg.K)
	}
	if c.cfg.MaxTurns > 0 && after > c.cfg.MaxTurns {
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: %d turns would take node %d past MaxTurns %d", rollout.ErrConflict, len(s.Turns), n.ID, c.cfg.MaxTurns)
	}
	if len(s.Turns) > 0 && scoredAt(&n, g.Interval) {
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d is already scored for interval %d", rollout.ErrConflict, n.ID, g.Interval)
	}
	ended := false
	for i, t := range s.Turns {
		if t.Done && i < len(s.Turns)-1 {
			return rollout.SubmitResult{}, g, fmt.Errorf("%w: turn %d is done but %d more follow it", model.ErrInvalid, i, len(s.Turns)-1-i)
		}
		ended = ended || t.Done
	}
	truncated := !ended && c.cfg.MaxTurns > 0 && after >= c.cfg.MaxTurns
	switch {
	case s.Reward != nil && s.RewardPending:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d: a reward and reward_pending exclude each other", model.ErrInvalid, n.ID)
	case s.Reward != nil && !ended && !truncated:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: a reward goes with the turns that end a branch; node %d goes on", model.ErrInvalid, n.ID)
	case s.Score != nil && c.cfg.NoScoring:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: run %q does not score branches (NoScoring)", rollout.ErrConflict, c.run)
	case s.Score != nil && (ended || truncated):
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d ends with these turns; a finished branch is a leaf, not scored", rollout.ErrConflict, n.ID)
	case s.Score != nil && after < start+c.cfg.K:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d is %d of K=%d turns into interval %d", rollout.ErrTooEarly, n.ID, after-start, c.cfg.K, g.Interval)
	case s.Score != nil && scoredAt(&n, g.Interval):
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d is already scored for interval %d", rollout.ErrConflict, n.ID, g.Interval)
	}
	switch {
	case enc.Len() > 0:
		err = r.AppendEncodedTurns(n.ID, s.From, enc)
	case len(s.Turns) > 0:
		err = r.AppendTurns(n.ID, s.From, s.Turns...)
	}
	if err != nil {
		return rollout.SubmitResult{}, g, err
	}
	if s.EnvState != nil {
		if err := r.SetEnvState(n.ID, s.EnvState); err != nil {
			return rollout.SubmitResult{}, g, err
		}
	}
	status := model.NodeActive
	switch {
	case ended || truncated:
		status = model.NodeCompleted
		if truncated {
			status = model.NodeTruncated
		}
		if !s.RewardPending {
			reward := 0.0
			if s.Reward != nil {
				reward = *s.Reward
			} else if reward, err = pathReward(r, n.ID); err != nil {
				return rollout.SubmitResult{}, g, err
			}
			if err := r.SetReward(n.ID, reward); err != nil {
				return rollout.SubmitResult{}, g, err
			}
		}
		if err := r.SetNodeStatus(n.ID, status); err != nil {
			return rollout.SubmitResult{}, g, err
		}
		if s.RewardPending {
			c.notePending(n.ID)
		}
	case s.Score != nil:
		if err := r.Score(n.ID, model.Score{Interval: g.Interval, Turn: after, Value: *s.Score}); err != nil {
			return rollout.SubmitResult{}, g, err
		}
	case c.cfg.RemoteScores && after == start+c.cfg.K:
		c.notePending(n.ID) // its K turns are in: it waits for the remote scorer
	}
	c.extend(h)
	return rollout.SubmitResult{Node: n.ID, Status: status, Turns: n.Turns + len(s.Turns), Attempt: n.Attempt}, g, nil
}

// fail records a branch's failure: a retry while attempts remain (the node
// goes failed, then active again with Attempt+1, both on record), else
// failed for good with the error as its Error.
func (c *Coordinator) fail(r *store.RunTx, n model.Node, g model.Group, reason string) (rollout.SubmitResult, model.Group, error) {
	if err := r.FailNode(n.ID, reason); err != nil {
		return rollout.SubmitResult{}, g, err
	}
	res := rollout.SubmitResult{Node: n.ID, Status: model.NodeFailed, Turns: n.Turns, Attempt: n.Attempt}
	if n.Attempt+1 < c.opts.MaxAttempts {
		if err := r.SetNodeStatus(n.ID, model.NodeActive); err != nil {
			return res, g, err
		}
		res.Status, res.Attempt, res.Retry = model.NodeActive, n.Attempt+1, true
	}
	return res, g, nil
}

// routeIfComplete routes group id when every active branch is routable,
// and reports whether the group is left with no active branch.
func (c *Coordinator) routeIfComplete(r *store.RunTx, step, id uint64) (*rollout.Routing, bool, error) {
	g, err := r.GroupAt(step, id)
	if err != nil {
		return nil, false, err
	}
	if g.Status != model.GroupOpen {
		return nil, false, nil
	}
	nodes, err := r.GroupNodes(g)
	if err != nil {
		return nil, false, err
	}
	var active []model.Node
	awaiting := false
	for i := range nodes {
		awaiting = awaiting || nodes[i].AwaitsReward()
		if nodes[i].Status != model.NodeActive {
			continue
		}
		if c.phase(&nodes[i], &g) != routable {
			return nil, false, nil
		}
		active = append(active, nodes[i])
	}
	if len(active) == 0 {
		// The submit ended the interval's last branches: the interval is
		// complete, as it is after routing.
		return nil, !awaiting, r.SetGroupInterval(g.Step, g.ID, g.Interval+1)
	}
	routed, err := c.route(r, g, active)
	if err != nil {
		return nil, false, err
	}
	return routed, len(routed.Active) == 0 && !awaiting, nil
}

// route applies PaTR's routing to a group whose interval is complete: the
// decisions with their inputs, pruned branches' rewards, the children of
// expansions (forked at the parent's last turn, with its env state), and
// the group's next interval. Under NoScoring every branch goes on.
func (c *Coordinator) route(r *store.RunTx, g model.Group, active []model.Node) (*rollout.Routing, error) {
	sort.Slice(active, func(i, j int) bool { return active[i].ID < active[j].ID })
	out := &rollout.Routing{Step: g.Step, Group: g.ID, Interval: g.Interval, Active: []uint64{}}
	if c.cfg.NoScoring {
		for _, n := range active {
			out.Active = append(out.Active, n.ID)
		}
		return out, r.SetGroupInterval(g.Step, g.ID, g.Interval+1)
	}
	branches := make([]Branch, len(active))
	for i, n := range active {
		rep, err := repeatRunOf(r, n, c.cfg.RepeatPrune)
		if err != nil {
			return nil, err
		}
		branches[i] = Branch{Node: n.ID, Score: scoreAt(&n, g.Interval), RepeatRun: rep}
	}
	for i, d := range Route(branches, c.cfg) {
		n := active[i]
		if err := r.Route(n.ID, d.Record(g.Interval)); err != nil {
			return nil, err
		}
		rd := rollout.RoutedDecision{Decision: d}
		switch d.Action {
		case model.ActionPrune:
			reward, err := pathReward(r, n.ID)
			if err != nil {
				return nil, err
			}
			if err := r.SetReward(n.ID, reward); err != nil {
				return nil, err
			}
		case model.ActionExpand:
			for o := range d.Children {
				child, err := r.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: n.ID, Fork: n.Turns, Ordinal: o, EnvState: n.EnvState})
				if err != nil {
					return nil, err
				}
				rd.ChildIDs = append(rd.ChildIDs, child.ID)
				out.Active = append(out.Active, child.ID)
			}
		case model.ActionSurvive:
			out.Active = append(out.Active, n.ID)
		}
		out.Decisions = append(out.Decisions, rd)
	}
	sort.Slice(out.Active, func(i, j int) bool { return out.Active[i] < out.Active[j] })
	return out, r.SetGroupInterval(g.Step, g.ID, g.Interval+1)
}
