package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Worker grows a step's branches over HTTP, as one of any number of
// worker processes: it leases branches, restores each one's episode from
// the history the lease carries, samples their intervals with one batched
// policy call per round, scores them, and submits. It keeps no rule of
// its own — the server's coordinator decides what each lease asks for and
// routes the groups — and no state between leases, so it may be killed
// at any point: its leases expire and go to another worker, and what it
// had not submitted is sampled again from the last committed turn.
type Worker struct {
	Client *Client
	Run    string
	Name   string // on its leases
	Policy rollout.BatchPolicy
	Env    rollout.Env
	Scorer rollout.Scorer // nil when the run does not score (NoScoring)
	// Max is how many branches one lease request takes (0: 16); TTL how
	// long the server keeps them for this worker (0: the server's default).
	Max int
	TTL time.Duration
	// PolicyVersion is recorded on turns whose Move carries none.
	PolicyVersion uint64
	// Poll is the wait between lease requests while every free branch is
	// held by other workers (0: 50 ms); the same backoff, doubled up to
	// two seconds, spaces retries while the server is unreachable.
	Poll time.Duration
	// OnSubmit, when set, sees every submit the server acknowledged.
	OnSubmit func(api.SubmitRequest, rollout.Submitted)
}

// WorkStats counts what a Worker did.
type WorkStats struct {
	Leases      int // branches leased
	Turns       int // turns acknowledged by the server
	Submits     int // acknowledged submit requests
	PolicyCalls int
	Lost        int // branches whose work was refused (lease lost, branch ended) and dropped
}

// leased is one leased branch being advanced.
type leased struct {
	api.LeaseGrant
	ep      rollout.Episode
	turns   []store.Turn
	history []store.Turn
	ended   bool
	score   *float64
	err     error
}

func (b *leased) key() rollout.TurnKey {
	k := b.Key
	k.Index += len(b.turns)
	k.Path += len(b.turns)
	return k
}

// Work grows step until it has no active branch left (every group done;
// closing them is the driver's), or ctx ends.
func (w *Worker) Work(ctx context.Context, step uint64) (WorkStats, error) {
	var st WorkStats
	max := w.Max
	if max == 0 {
		max = 16
	}
	poll := w.Poll
	if poll == 0 {
		poll = 50 * time.Millisecond
	}
	wait := poll
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		grants, err := w.Client.Lease(ctx, w.Run, api.LeaseRequest{Worker: w.Name, Max: max, Step: step, TTLMs: w.TTL.Milliseconds()})
		if err == nil && len(grants) == 0 {
			var s api.StepStatus
			if s, err = w.Client.StepStatus(ctx, w.Run, step); err == nil && s.Active == 0 {
				return st, nil
			}
		}
		if err != nil && !transient(ctx, err) {
			return st, err
		}
		if err != nil || len(grants) == 0 {
			if !sleep(ctx, wait) {
				return st, ctx.Err()
			}
			if err != nil {
				wait = min(2*wait, 2*time.Second)
			}
			continue
		}
		wait = poll
		st.Leases += len(grants)
		wave, err := w.sample(ctx, grants, &st)
		if err != nil {
			return st, err
		}
		if err := w.submit(ctx, wave, &st); err != nil {
			return st, err
		}
	}
}

// sample restores every leased branch, advances the wave round by round
// (one policy call for every branch still sampling), then scores.
func (w *Worker) sample(ctx context.Context, grants []api.LeaseGrant, st *WorkStats) ([]*leased, error) {
	wave := make([]*leased, len(grants))
	for i, g := range grants {
		b := &leased{LeaseGrant: g, history: g.History}
		var err error
		if len(g.History) == 0 && g.EnvState == nil {
			b.ep, err = w.Env.Reset(ctx, g.Task)
		} else {
			b.ep, err = w.Env.Restore(ctx, g.Task, g.History, g.EnvState)
		}
		if err != nil {
			b.err = fmt.Errorf("env restore: %w", err)
		}
		wave[i] = b
	}
	for {
		var who []*leased
		for _, b := range wave {
			if b.err == nil && !b.ended && len(b.turns) < b.Turns {
				who = append(who, b)
			}
		}
		if len(who) == 0 {
			break
		}
		reqs := make([]rollout.ActRequest, len(who))
		for i, b := range who {
			reqs[i] = rollout.ActRequest{Key: b.key(), Task: b.Task, History: b.history}
		}
		st.PolicyCalls++
		moves, err := w.Policy.ActBatch(ctx, reqs)
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		var items rollout.ItemErrors
		if err != nil && !errors.As(err, &items) {
			for _, b := range who {
				b.err = fmt.Errorf("policy: %w", err)
			}
			continue
		}
		if len(moves) != len(who) {
			return nil, fmt.Errorf("%w: batch policy returned %d moves for %d requests", store.ErrInvalid, len(moves), len(who))
		}
		for i, b := range who {
			if items[i] != nil {
				b.err = fmt.Errorf("policy: %w", items[i])
				continue
			}
			mv := moves[i]
			obs, err := b.ep.Step(ctx, b.key(), mv)
			if err != nil {
				b.err = fmt.Errorf("env: %w", err)
				continue
			}
			v := mv.PolicyVersion
			if v == 0 {
				v = w.PolicyVersion
			}
			t := store.Turn{Action: mv.Text, ActionTokens: mv.Tokens, ActionLogprobs: mv.Logprobs,
				Observation: obs.Text, ObservationTokens: obs.Tokens, Reward: obs.Reward, Done: obs.Done, PolicyVersion: v}
			b.turns = append(b.turns, t)
			b.history = append(b.history[:len(b.history):len(b.history)], t)
			b.ended = obs.Done
		}
	}
	for _, b := range wave {
		if b.err != nil || b.ended || !b.Score || len(b.turns) != b.Turns || w.Scorer == nil {
			continue
		}
		s, err := w.Scorer.Score(ctx, b.Task, b.history)
		switch {
		case err != nil:
			b.err = fmt.Errorf("scorer: %w", err)
		case !(s >= 0 && s <= 1):
			b.err = fmt.Errorf("scorer: returned %v, want a score in [0,1]", s)
		default:
			b.score = &s
		}
	}
	return wave, nil
}

// submit sends the wave's work in one request. A refused request (409,
// 400) is sorted out branch by branch, so one lost lease does not cost
// the others their work: a refused branch is dropped (another lease will
// redo it), and turns the store refuses are reported as the branch's
// failure.
func (w *Worker) submit(ctx context.Context, wave []*leased, st *WorkStats) error {
	var subs []rollout.Submission
	for _, b := range wave {
		s := rollout.Submission{Lease: b.ID, Node: b.Node, From: b.From}
		switch {
		case b.err != nil:
			s.Error = b.err.Error()
		case len(b.turns) == 0 && b.score == nil:
			continue
		default:
			s.Turns, s.Score = b.turns, b.score
			if len(b.turns) > 0 {
				s.EnvState = b.ep.State()
			}
		}
		subs = append(subs, s)
	}
	if len(subs) == 0 {
		return nil
	}
	err := w.send(ctx, subs, st)
	if err == nil || !(errors.Is(err, rollout.ErrConflict) || errors.Is(err, api.ErrBadRequest)) {
		return err
	}
	for _, s := range subs {
		err := w.send(ctx, []rollout.Submission{s}, st)
		if errors.Is(err, api.ErrBadRequest) && len(s.Turns) > 0 {
			// The store refused what the policy or env produced: the
			// branch failed, like any other policy or env failure.
			err = w.send(ctx, []rollout.Submission{{Lease: s.Lease, Node: s.Node, Error: "turn: " + err.Error()}}, st)
		}
		if errors.Is(err, rollout.ErrConflict) {
			st.Lost++
		} else if err != nil {
			return err
		}
	}
	return nil
}

// send submits under one client key, retrying transport failures and 5xx
// with that key until the server answers: the retry of a submit that did
// commit gets the first answer back instead of writing again.
func (w *Worker) send(ctx context.Context, subs []rollout.Submission, st *WorkStats) error {
	req := api.SubmitRequest{Keyed: api.Keyed{ClientKey: NewKey()}, Submissions: subs}
	wait := w.Poll
	if wait == 0 {
		wait = 50 * time.Millisecond
	}
	for {
		out, err := w.Client.Submit(ctx, w.Run, req)
		if err == nil {
			st.Submits++
			for _, s := range subs {
				st.Turns += len(s.Turns)
			}
			if w.OnSubmit != nil {
				w.OnSubmit(req, out)
			}
			return nil
		}
		if !transient(ctx, err) {
			return err
		}
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// transient reports whether err is worth retrying as it is: the server
// did not answer (and ctx is still live), or answered 5xx.
func transient(ctx context.Context, err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	return ctx.Err() == nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
