package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// Verifier serves the work a step waits for from outside its workers: the
// outcome rewards of branches that ended with their reward pending (a test
// suite, a remote reward model) and, under remote_scores, the process
// scores of branches through their interval's turns (a remote PRM). It
// lists the step's pending work with each branch's path, computes up to
// Workers at once, and submits them under client keys, so a retry after a
// lost answer never writes twice. Any number of verifiers may serve one
// step; a reward or score another delivered first is refused and dropped.
type Verifier struct {
	Client *Client
	Run    string
	// Reward computes a finished branch's outcome reward from its whole
	// path; nil leaves rewards to another verifier. An error is recorded
	// as the leaf's failure (never as a zero reward).
	Reward func(ctx context.Context, task rollout.Task, path []model.Turn) (float64, error)
	// Score computes a branch's process score in [0,1] at the end of an
	// interval; nil leaves scores to another. An error fails the branch
	// like any scorer failure (it is retried).
	Score func(ctx context.Context, task rollout.Task, path []model.Turn) (float64, error)
	// Workers bounds the rewards and scores computed at once (0: 8).
	Workers int
	// Poll is the wait between looks while nothing is pending (0: 100 ms).
	Poll time.Duration
}

// VerifyStats counts what a Verifier delivered.
type VerifyStats struct {
	Rewards int
	Scores  int
	Dropped int // delivered first by another verifier, or no longer pending
}

// Serve delivers step's pending rewards and scores until the step has no
// active branch and nothing pending, or ctx ends.
func (v *Verifier) Serve(ctx context.Context, step uint64) (VerifyStats, error) {
	var st VerifyStats
	if v.Reward == nil && v.Score == nil {
		return st, errors.New("patrdb client: a Verifier needs a Reward or a Score function")
	}
	workers := v.Workers
	if workers == 0 {
		workers = 8
	}
	poll := v.Poll
	if poll == 0 {
		poll = 100 * time.Millisecond
	}
	for {
		// The listing leaves the paths out: a branch's path is read once,
		// when its reward or score is computed, not with every poll.
		p, err := v.Client.Pending(ctx, v.Run, step, false)
		if err != nil {
			if transient(ctx, err) && sleep(ctx, poll) {
				continue
			}
			return st, err
		}
		var rewards, scores []api.PendingItem
		if v.Reward != nil {
			rewards = p.Rewards
		}
		if v.Score != nil {
			scores = p.Scores
		}
		if len(rewards)+len(scores) == 0 {
			if len(p.Rewards)+len(p.Scores) == 0 {
				s, err := v.Client.StepStatus(ctx, v.Run, step)
				if err == nil && s.Active == 0 && s.AwaitingRewards == 0 {
					return st, nil
				}
			}
			if !sleep(ctx, poll) {
				return st, ctx.Err()
			}
			continue
		}
		rs, ss := v.compute(ctx, rewards, scores, workers)
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if err := v.deliver(ctx, rs, ss, &st); err != nil {
			return st, err
		}
	}
}

// compute runs the Reward and Score functions over the pending work, up to
// workers at once.
func (v *Verifier) compute(ctx context.Context, rewards, scores []api.PendingItem, workers int) ([]rollout.RewardSubmission, []rollout.ScoreSubmission) {
	rs := make([]rollout.RewardSubmission, len(rewards))
	ss := make([]rollout.ScoreSubmission, len(scores))
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	run := func(fn func()) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn()
		}()
	}
	for i, p := range rewards {
		run(func() {
			rs[i] = rollout.RewardSubmission{Node: p.Node}
			path, err := v.path(ctx, p)
			if err != nil {
				rs[i].Node = 0 // not delivered: asked again at the next look
				return
			}
			r, err := v.Reward(ctx, p.Task, path)
			if err != nil {
				rs[i].Error = err.Error()
			} else {
				rs[i].Reward = &r
			}
		})
	}
	for i, p := range scores {
		run(func() {
			ss[i] = rollout.ScoreSubmission{Node: p.Node, Interval: p.Interval}
			path, err := v.path(ctx, p)
			if err != nil {
				ss[i].Node = 0
				return
			}
			s, err := v.Score(ctx, p.Task, path)
			switch {
			case err != nil:
				ss[i].Error = err.Error()
			case !(s >= 0 && s <= 1):
				ss[i].Error = fmt.Sprintf("score %v is outside [0,1]", s)
			default:
				ss[i].Score = &s
			}
		})
	}
	wg.Wait()
	return slices.DeleteFunc(rs, func(r rollout.RewardSubmission) bool { return r.Node == 0 }),
		slices.DeleteFunc(ss, func(s rollout.ScoreSubmission) bool { return s.Node == 0 })
}

// path reads a pending branch's whole path (its history when the listing
// carried it).
func (v *Verifier) path(ctx context.Context, p api.PendingItem) ([]model.Turn, error) {
	if p.History != nil {
		return p.History, nil
	}
	tr, err := retried(ctx, func() (api.Trajectory, error) { return v.Client.Trajectory(ctx, v.Run, p.Node) })
	if err != nil {
		return nil, err
	}
	out := make([]model.Turn, len(tr.Turns))
	for i := range tr.Turns {
		out[i] = tr.Turns[i].Turn
	}
	return out, nil
}

// deliver submits rewards and scores, together when it can; a refusal
// (another verifier was first) is sorted out one by one and the refused
// ones dropped.
func (v *Verifier) deliver(ctx context.Context, rs []rollout.RewardSubmission, ss []rollout.ScoreSubmission, st *VerifyStats) error {
	sendRewards := func(rs []rollout.RewardSubmission) error {
		if len(rs) == 0 {
			return nil
		}
		req := api.RewardsRequest{Keyed: api.Keyed{ClientKey: NewKey()}, Rewards: rs}
		_, err := retried(ctx, func() (rollout.Submitted, error) { return v.Client.SubmitRewards(ctx, v.Run, req) })
		return err
	}
	sendScores := func(ss []rollout.ScoreSubmission) error {
		if len(ss) == 0 {
			return nil
		}
		req := api.ScoresRequest{Keyed: api.Keyed{ClientKey: NewKey()}, Scores: ss}
		_, err := retried(ctx, func() (rollout.Submitted, error) { return v.Client.SubmitScores(ctx, v.Run, req) })
		return err
	}
	for _, batch := range []struct {
		n    int
		all  func() error
		one  func(i int) error
		done *int
	}{
		{len(rs), func() error { return sendRewards(rs) }, func(i int) error { return sendRewards(rs[i : i+1]) }, &st.Rewards},
		{len(ss), func() error { return sendScores(ss) }, func(i int) error { return sendScores(ss[i : i+1]) }, &st.Scores},
	} {
		err := batch.all()
		if err == nil {
			*batch.done += batch.n
			continue
		}
		if !errors.Is(err, rollout.ErrConflict) {
			return err
		}
		for i := range batch.n {
			switch err := batch.one(i); {
			case err == nil:
				*batch.done++
			case errors.Is(err, rollout.ErrConflict):
				st.Dropped++
			default:
				return err
			}
		}
	}
	return nil
}

// retried sends one keyed write (its key chosen once, outside send) until
// the server answers: transport failures and 5xx are retried as they are,
// so a write that did commit is answered as before, not written again.
func retried[T any](ctx context.Context, send func() (T, error)) (T, error) {
	wait := 50 * time.Millisecond
	for {
		out, err := send()
		if err == nil || !transient(ctx, err) {
			return out, err
		}
		if !sleep(ctx, wait) {
			return out, ctx.Err()
		}
		wait = min(2*wait, 2*time.Second)
	}
}
