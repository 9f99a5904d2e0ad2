package tree

import (
	"fmt"
	"sort"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Work that arrives apart from a branch's lease: a deferred outcome
// reward (a verifier, a remote reward model) and a remote process score.
// Neither needs a lease — any process may deliver it — and both are held
// to the state of the branch they name, so a late, repeated or misdirected
// one is refused (ErrNotPending) and writes nothing.

// notePending starts the PendingTTL clock of a branch, unless it runs.
func (c *Coordinator) notePending(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		c.pending[id] = c.opts.Now()
	}
}

// pendingSince is when the branch was first seen waiting (noting it now
// if it was not).
func (c *Coordinator) pendingSince(id uint64) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.pending[id]
	if !ok {
		t = c.opts.Now()
		c.pending[id] = t
	}
	return t
}

// awaitsScore reports whether active branch n waits for a remote score.
func (c *Coordinator) awaitsScore(n *model.Node, g *model.Group) bool {
	return c.cfg.RemoteScores && n.Status == model.NodeActive && c.phase(n, g) == needScore
}

// Publish records v as the run's current policy version (store's
// RunTx.PublishVersion: versions only go forward; the current one again
// writes nothing). From its commit on,
// leases and turns are judged against it: MaxStaleness, and under
// OnPublishAbort every lease granted before it is void.
func (c *Coordinator) Publish(tx *store.Tx, v uint64) error {
	r, err := c.runTx(tx)
	if err != nil {
		return err
	}
	if err := r.PublishVersion(v); err != nil {
		return err
	}
	c.mu.Lock()
	c.noteVersion(v)
	c.mu.Unlock()
	return nil
}

// SubmitRewards delivers deferred outcome rewards, in order, inside tx:
// each names a finished branch that awaits its reward (else
// ErrNotPending). A reward is recorded as the leaf's; an error records the
// leaf failed (left out of the advantages, never a zero reward). Done
// lists the groups left with nothing to wait for: Close them.
func (c *Coordinator) SubmitRewards(tx *store.Tx, rs []rollout.RewardSubmission) (*rollout.Submitted, error) {
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	out := &rollout.Submitted{Results: make([]rollout.SubmitResult, 0, len(rs))}
	touched := groupSet{}
	for i, s := range rs {
		n, err := r.Node(s.Node)
		if err != nil {
			return nil, fmt.Errorf("reward %d (node %d): %w", i, s.Node, err)
		}
		switch {
		case (s.Reward == nil) == (s.Error == ""):
			return nil, fmt.Errorf("%w: reward %d (node %d): give a reward or an error", model.ErrInvalid, i, s.Node)
		case !n.AwaitsReward():
			return nil, fmt.Errorf("%w: reward %d: node %d is %s with %s", rollout.ErrNotPending, i, n.ID, n.Status, rewardState(&n))
		case s.Reward != nil:
			err = r.SetReward(n.ID, *s.Reward)
		default:
			err = r.FailNode(n.ID, "reward: "+s.Error)
			n.Status = model.NodeFailed
		}
		if err != nil {
			return nil, fmt.Errorf("reward %d (node %d): %w", i, s.Node, err)
		}
		out.Results = append(out.Results, rollout.SubmitResult{Node: n.ID, Status: n.Status, Turns: n.Turns, Attempt: n.Attempt})
		touched[n.Group] = n.Step
	}
	return out, c.doneGroups(r, touched, out)
}

func rewardState(n *model.Node) string {
	if n.HasReward {
		return fmt.Sprintf("its reward %v", n.Reward)
	}
	return "no reward due"
}

// doneGroups lists in out.Done the touched groups that are open with no
// active branch and no leaf awaiting its reward.
func (c *Coordinator) doneGroups(r *store.RunTx, touched groupSet, out *rollout.Submitted) error {
	for _, id := range touched.ids() {
		g, err := r.GroupAt(touched[id], id)
		if err != nil {
			return err
		}
		if g.Status != model.GroupOpen {
			continue
		}
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		if waiting, _ := groupWaits(nodes); !waiting {
			out.Done = append(out.Done, id)
		}
	}
	return nil
}

// groupWaits reports whether a group still waits for a branch (active) or
// a reward, and how many of its leaves await their reward.
func groupWaits(nodes []model.Node) (waiting bool, awaitingRewards int) {
	for i := range nodes {
		switch {
		case nodes[i].Status == model.NodeActive:
			waiting = true
		case nodes[i].AwaitsReward():
			waiting = true
			awaitingRewards++
		}
	}
	return waiting, awaitingRewards
}

// SubmitScores delivers process scores apart from the turns they score,
// in order, inside tx: each names an active branch whose group is at
// Interval and whose K turns of it are stored, unscored (else
// ErrNotPending, or ErrTooEarly before its K turns). A score in [0,1] is
// recorded; an error fails the branch like any scorer failure (retried,
// then recorded failed). A group routes, in this transaction, when its
// interval's last score arrives — exactly as if its workers had scored.
func (c *Coordinator) SubmitScores(tx *store.Tx, ss []rollout.ScoreSubmission) (*rollout.Submitted, error) {
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	out := &rollout.Submitted{Results: make([]rollout.SubmitResult, 0, len(ss))}
	touched := groupSet{}
	for i, s := range ss {
		res, g, err := c.scoreOne(r, s)
		if err != nil {
			return nil, fmt.Errorf("score %d (node %d): %w", i, s.Node, err)
		}
		out.Results = append(out.Results, res)
		touched[g.ID] = g.Step
	}
	return out, c.settleGroups(r, touched, out)
}

func (c *Coordinator) scoreOne(r *store.RunTx, s rollout.ScoreSubmission) (rollout.SubmitResult, model.Group, error) {
	n, err := r.Node(s.Node)
	if err != nil {
		return rollout.SubmitResult{}, model.Group{}, err
	}
	g, err := r.GroupAt(n.Step, n.Group)
	if err != nil {
		return rollout.SubmitResult{}, g, err
	}
	switch {
	case (s.Score == nil) == (s.Error == ""):
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: give a score or an error", model.ErrInvalid)
	case c.cfg.NoScoring:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: run %q does not score branches (NoScoring)", rollout.ErrConflict, c.run)
	case n.Status != model.NodeActive:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d is %s", rollout.ErrNotPending, n.ID, n.Status)
	case g.Status != model.GroupOpen || g.Interval != s.Interval:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d's group %d is at interval %d, not %d", rollout.ErrNotPending, n.ID, g.ID, g.Interval, s.Interval)
	}
	switch c.phase(&n, &g) {
	case needTurns:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d has %d of K=%d turns of interval %d", rollout.ErrTooEarly, n.ID, n.PathLen()-intervalStart(&n, &g, c.cfg.K), c.cfg.K, g.Interval)
	case routable:
		return rollout.SubmitResult{}, g, fmt.Errorf("%w: node %d is already scored for interval %d", rollout.ErrNotPending, n.ID, g.Interval)
	}
	if s.Error != "" {
		c.forgetPending(n.ID)
		return c.fail(r, n, g, "scorer: "+s.Error)
	}
	if err := r.Score(n.ID, model.Score{Interval: g.Interval, Turn: n.PathLen(), Value: *s.Score}); err != nil {
		return rollout.SubmitResult{}, g, err
	}
	c.forgetPending(n.ID)
	return rollout.SubmitResult{Node: n.ID, Status: n.Status, Turns: n.Turns, Attempt: n.Attempt}, g, nil
}

func (c *Coordinator) forgetPending(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// Pending lists the branches of step (0: every open step) that wait for a
// remote score or a deferred reward, in node order, with when each was
// first seen waiting and when it will fail for want of one.
func (c *Coordinator) Pending(tx *store.Tx, step uint64) (rollout.Pending, error) {
	out := rollout.Pending{Step: step, Scores: []rollout.PendingWork{}, Rewards: []rollout.PendingWork{}}
	err := c.eachWaiting(tx, step, func(n *model.Node, g *model.Group, reward bool) {
		since := c.pendingSince(n.ID)
		w := rollout.PendingWork{Node: n.ID, Group: g.ID, Step: g.Step, Interval: g.Interval, Attempt: n.Attempt,
			PathLen: n.PathLen(), Task: TaskOf(*g), SinceAt: since.UnixNano(), DueAt: since.Add(c.cfg.PendingTTL()).UnixNano()}
		if reward {
			out.Rewards = append(out.Rewards, w)
		} else {
			out.Scores = append(out.Scores, w)
		}
	})
	return out, err
}

// eachWaiting calls fn with every branch of the open groups of step (0:
// every step past the run's last completed one) that awaits a remote score
// (reward false) or its deferred reward (reward true), in node order.
func (c *Coordinator) eachWaiting(tx *store.Tx, step uint64, fn func(n *model.Node, g *model.Group, reward bool)) error {
	r, err := c.runTx(tx)
	if err != nil {
		return err
	}
	steps := []uint64{step}
	if step == 0 {
		if steps, err = c.OpenSteps(tx); err != nil {
			return err
		}
	}
	for _, st := range steps {
		groups, err := r.Groups(st)
		if err != nil {
			return err
		}
		for i := range groups {
			g := &groups[i]
			if g.Status != model.GroupOpen {
				continue
			}
			nodes, err := r.GroupNodes(*g)
			if err != nil {
				return err
			}
			sort.Slice(nodes, func(a, b int) bool { return nodes[a].ID < nodes[b].ID })
			for j := range nodes {
				switch n := &nodes[j]; {
				case n.AwaitsReward():
					fn(n, g, true)
				case c.awaitsScore(n, g):
					fn(n, g, false)
				}
			}
		}
	}
	return nil
}

// Overdue reports whether a branch has waited longer than PendingTTL
// for its reward or score, as far as the coordinator has seen: a cheap,
// lock-only test before Expire's write.
func (c *Coordinator) Overdue() bool {
	limit := c.opts.Now().Add(-c.cfg.PendingTTL())
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.pending {
		if t.Before(limit) {
			return true
		}
	}
	return false
}

// Expire gives up, inside tx, on what waited longer than PendingTTL: a
// leaf whose deferred reward never came is recorded failed ("reward timed
// out"), never as 0; a branch whose remote score never came fails like any
// scorer failure (retried with a fresh wait, then failed). Groups settle
// as they do on a submit (routing, Done). Waits are timed from when this
// coordinator first saw them; a restarted one starts them again.
func (c *Coordinator) Expire(tx *store.Tx) (*rollout.Submitted, error) {
	now := c.opts.Now()
	limit := now.Add(-c.cfg.PendingTTL())
	c.mu.Lock()
	var due []uint64
	for id, t := range c.pending {
		if t.Before(limit) {
			due = append(due, id)
		}
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i] < due[j] })
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	out := &rollout.Submitted{}
	routable, rewarded := groupSet{}, groupSet{}
	waited := c.cfg.PendingTTL().String()
	for _, id := range due {
		n, err := r.Node(id)
		if err != nil {
			return nil, err
		}
		g, err := r.GroupAt(n.Step, n.Group)
		if err != nil {
			return nil, err
		}
		switch {
		case n.AwaitsReward():
			if err := r.FailNode(n.ID, "reward timed out after "+waited); err != nil {
				return nil, err
			}
			out.Results = append(out.Results, rollout.SubmitResult{Node: n.ID, Status: model.NodeFailed, Turns: n.Turns, Attempt: n.Attempt})
			rewarded[g.ID] = g.Step
		case c.awaitsScore(&n, &g):
			res, _, err := c.fail(r, n, g, "scorer: score timed out after "+waited)
			if err != nil {
				return nil, err
			}
			out.Results = append(out.Results, res)
			routable[g.ID] = g.Step
		}
		c.forgetPending(id) // a retried branch starts a fresh wait when it is seen again
	}
	if err := c.settleGroups(r, routable, out); err != nil {
		return nil, err
	}
	for id := range routable {
		delete(rewarded, id)
	}
	return out, c.doneGroups(r, rewarded, out)
}
