package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/patrdb/patrdb/model"
)

// The sampling loop every worker runs, the in-process engine and the HTTP
// worker alike: each leased branch advances on its own — restore, then
// turn after turn (a policy move, an env step), then its process score —
// while the policy is asked for many branches' moves at once. A branch
// waits for nothing but its own env and the next policy call, so one slow
// tool call holds up its branch alone.

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	Policy BatchPolicy
	Env    Env
	Scorer Scorer // nil: no branch is scored here (the run does not score, or a remote scorer does)
	// MaxBatch caps the requests of one policy call (0: no cap). A larger
	// queue is split into several calls, issued concurrently (several
	// inference replicas serve them at once).
	MaxBatch int
	// Workers bounds the restores, env steps and scorer calls in flight
	// (0: DefaultSamplerWorkers). Env and Scorer must be safe for
	// concurrent use; an Episode is used by one goroutine at a time.
	Workers int
	// Linger is how long a policy batch waits for more branches once one
	// asked, while others are still stepping their envs (0: DefaultLinger).
	// A batch goes out at once when every sampling branch is waiting for
	// the policy, or when MaxBatch requests are queued.
	Linger time.Duration
	// PolicyVersion is recorded on every turn whose Move carries none.
	PolicyVersion uint64
	// Lockstep samples the branches started together in rounds instead:
	// each round asks the policy for every one of them that needs a turn,
	// then steps their envs in the order they were started (one at a time
	// with Workers 1), and reports the round's turns (OnTurn) in that
	// order. A run is then the same from run to run whatever the timing —
	// what a reproducible demo or an env-step budget shared by all
	// branches needs — at the price of every branch waiting for the
	// round's slowest.
	Lockstep bool
}

// Defaults of SamplerOptions.
const (
	DefaultSamplerWorkers = 8
	DefaultLinger         = 5 * time.Millisecond
)

// Branch is one leased interval to sample: History is the path before it
// (inherited prefix included; not modified), Episode its running
// environment (nil: the sampler restores it from History and the lease's
// env state). After Sample, Turns hold what was sampled, Ended says the
// episode ended, Score the process score when the lease asked for one,
// and Err why the branch failed (a policy, env or scorer error, to be
// submitted as the branch's failure). OnTurn, when set, sees each turn as
// it is sampled (a worker that submits its turns as it goes).
//
// Context, when set, is the branch's own: ending it stops this branch
// alone (a worker whose lease was lost); nil means the context the branch
// was started with.
type Branch struct {
	Lease   Lease
	History []model.Turn
	Episode Episode
	OnTurn  func(b *Branch, t model.Turn)
	Context context.Context

	Turns []model.Turn
	Ended bool
	Score *float64
	Err   error
}

// Key is the TurnKey of the branch's next turn.
func (b *Branch) Key() TurnKey {
	k := b.Lease.Key
	k.Index += len(b.Turns)
	k.Path += len(b.Turns)
	return k
}

// Path is the branch's full path so far: History, then Turns.
func (b *Branch) Path() []model.Turn {
	return append(b.History[:len(b.History):len(b.History)], b.Turns...)
}

// SamplerStats counts a Sampler's work.
type SamplerStats struct {
	Turns       int // turns sampled
	PolicyCalls int
	MaxBatch    int // the most requests one policy call carried
}

// Sampler runs the sampling loop. It is safe for concurrent use: branches
// started by any number of goroutines share its policy batches and its
// bound on concurrent env steps. Its policy calls run under the context it
// was made with, so ending that context ends them; each branch's own work
// runs under the context it was started with.
type Sampler struct {
	ctx   context.Context
	opts  SamplerOptions
	slots chan struct{}

	mu       sync.Mutex
	queue    []*pendingAct
	sampling int // branches started and not yet through their turns
	waiting  int // of those, how many wait for a move (queued or in a call)
	timer    *time.Timer
	stats    SamplerStats
}

type pendingAct struct {
	req   ActRequest
	reply chan actReply
}

type actReply struct {
	move Move
	err  error
}

// NewSampler returns a sampler whose policy calls run under ctx, with
// opts' defaults filled in; Policy and Env are required.
func NewSampler(ctx context.Context, opts SamplerOptions) (*Sampler, error) {
	if opts.Policy == nil || opts.Env == nil {
		return nil, errors.New("rollout: a sampler needs a Policy and an Env")
	}
	if opts.MaxBatch < 0 || opts.Workers < 0 || opts.Linger < 0 {
		return nil, fmt.Errorf("rollout: MaxBatch %d, Workers %d and Linger %v must be >= 0", opts.MaxBatch, opts.Workers, opts.Linger)
	}
	if opts.Workers == 0 {
		opts.Workers = DefaultSamplerWorkers
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	return &Sampler{ctx: ctx, opts: opts, slots: make(chan struct{}, opts.Workers)}, nil
}

// Stats returns what the sampler has done so far.
func (s *Sampler) Stats() SamplerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Go samples each branch on a goroutine of its own and calls done with it
// (and ctx's error, when ctx ended) as soon as that branch is through;
// done may be called from several goroutines at once. Branches started by
// one call share their first policy batch: they all count as sampling
// before any of them asks for a move.
func (s *Sampler) Go(ctx context.Context, bs []*Branch, done func(b *Branch, err error)) {
	if s.opts.Lockstep {
		go func() {
			errs := s.lockstep(ctx, bs)
			for i, b := range bs {
				done(b, errs[i])
			}
		}()
		return
	}
	s.mu.Lock()
	s.sampling += len(bs)
	s.mu.Unlock()
	for _, b := range bs {
		bctx := ctx
		if b.Context != nil {
			bctx = b.Context
		}
		go func() { done(b, s.sample(bctx, b)) }()
	}
}

// Sample advances b through its lease and returns when it is through (Go
// for one branch, waited for).
func (s *Sampler) Sample(ctx context.Context, b *Branch) error {
	s.mu.Lock()
	s.sampling++
	s.mu.Unlock()
	return s.sample(ctx, b)
}

// sample advances b, counted as sampling by the caller: it restores the
// episode when b has none, samples up to Lease.Turns turns (fewer when the
// episode ends), and scores the branch when the lease asks for a score and
// the sampler has a scorer. A failing policy, env or scorer call ends the
// branch with Err set and returns nil; the error returned is ctx's, when
// it ended.
func (s *Sampler) sample(ctx context.Context, b *Branch) error {
	err := s.turns(ctx, b)
	if err != nil || b.Err != nil {
		return err
	}
	if !s.wantsScore(b) {
		return nil
	}
	return s.slot(ctx, func() error { return s.score(ctx, b) })
}

// wantsScore reports whether b is scored here: its lease asks for a score,
// it sampled its whole interval without ending, and there is a scorer.
func (s *Sampler) wantsScore(b *Branch) bool {
	return b.Lease.Score && !b.Ended && len(b.Turns) == b.Lease.Turns && s.opts.Scorer != nil
}

// score scores b when it wants a score (wantsScore).
func (s *Sampler) score(ctx context.Context, b *Branch) error {
	if !s.wantsScore(b) {
		return nil
	}
	score, err := s.opts.Scorer.Score(ctx, b.Lease.Task, b.Path())
	switch {
	case err != nil:
		return s.failed(ctx, b, "scorer", err)
	case !(score >= 0 && score <= 1):
		b.Err = fmt.Errorf("scorer: returned %v for node %d, want a score in [0,1]", score, b.Lease.Node)
	default:
		b.Score = &score
	}
	return nil
}

// turn is the turn a move and its observation make.
func (s *Sampler) turn(mv Move, obs Observation) model.Turn {
	v := mv.PolicyVersion
	if v == 0 {
		v = s.opts.PolicyVersion
	}
	return model.Turn{Action: mv.Text, ActionTokens: mv.Tokens, ActionLogprobs: mv.Logprobs,
		Observation: obs.Text, ObservationTokens: obs.Tokens, Reward: obs.Reward, Done: obs.Done, PolicyVersion: v}
}

// restore starts b's episode when it has none.
func (s *Sampler) restore(ctx context.Context, b *Branch) error {
	if b.Episode != nil {
		return nil
	}
	err := s.slot(ctx, func() (err error) {
		if len(b.History) == 0 && b.Lease.EnvState == nil {
			b.Episode, err = s.opts.Env.Reset(ctx, b.Lease.Task)
		} else {
			b.Episode, err = s.opts.Env.Restore(ctx, b.Lease.Task, b.History, b.Lease.EnvState)
		}
		return err
	})
	if err != nil {
		return s.failed(ctx, b, "env restore", err)
	}
	return nil
}

// failed records err as b's failure, unless ctx ended (then the failure is
// the cancellation's, not the branch's, and ctx's error is returned).
func (s *Sampler) failed(ctx context.Context, b *Branch, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("rollout: sampling interrupted: %w (%w)", cerr, err)
	}
	b.Err = fmt.Errorf("%s: %w", what, err)
	return nil
}

// slot runs fn holding one of the Workers slots.
func (s *Sampler) slot(ctx context.Context, fn func() error) error {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.slots }()
	return fn()
}

// turns restores b's episode and samples its turns, counted as sampling
// until it is through them.
func (s *Sampler) turns(ctx context.Context, b *Branch) error {
	defer func() {
		s.mu.Lock()
		s.sampling--
		s.dispatchIfReady()
		s.mu.Unlock()
	}()
	if err := s.restore(ctx, b); err != nil || b.Err != nil {
		return err
	}
	for len(b.Turns) < b.Lease.Turns && !b.Ended {
		key := b.Key()
		mv, err := s.act(ctx, ActRequest{Key: key, Task: b.Lease.Task, History: b.Path()})
		if err != nil {
			return s.failed(ctx, b, "policy", err)
		}
		var obs Observation
		if err := s.slot(ctx, func() (err error) {
			obs, err = b.Episode.Step(ctx, key, mv)
			return err
		}); err != nil {
			return s.failed(ctx, b, "env", err)
		}
		t := s.turn(mv, obs)
		b.Turns = append(b.Turns, t)
		b.Ended = obs.Done
		s.mu.Lock()
		s.stats.Turns++
		s.mu.Unlock()
		if b.OnTurn != nil {
			b.OnTurn(b, t)
		}
	}
	return nil
}

// act queues one request for the next policy batch and waits for its move.
func (s *Sampler) act(ctx context.Context, req ActRequest) (Move, error) {
	p := &pendingAct{req: req, reply: make(chan actReply, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, p)
	s.waiting++
	s.dispatchIfReady()
	if len(s.queue) > 0 && s.timer == nil {
		s.timer = time.AfterFunc(s.opts.Linger, func() {
			s.mu.Lock()
			s.timer = nil
			s.dispatch()
			s.mu.Unlock()
		})
	}
	s.mu.Unlock()
	select {
	case r := <-p.reply:
		return r.move, r.err
	case <-ctx.Done():
		// The call may still answer; the reply channel is buffered.
		return Move{}, ctx.Err()
	}
}

// dispatchIfReady sends the queue when waiting longer cannot grow the
// batch: every sampling branch waits for a move, or a full batch is
// queued. s.mu must be held.
func (s *Sampler) dispatchIfReady() {
	full := s.opts.MaxBatch > 0 && len(s.queue) >= s.opts.MaxBatch
	if len(s.queue) > 0 && (full || s.waiting >= s.sampling) {
		s.dispatch()
	}
}

// dispatch sends every queued request, in calls of at most MaxBatch, each
// call on its own goroutine. s.mu must be held.
func (s *Sampler) dispatch() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	for len(s.queue) > 0 {
		n := len(s.queue)
		if s.opts.MaxBatch > 0 {
			n = min(n, s.opts.MaxBatch)
		}
		batch := s.queue[:n:n]
		s.queue = s.queue[n:]
		s.stats.PolicyCalls++
		s.stats.MaxBatch = max(s.stats.MaxBatch, n)
		go s.call(batch)
	}
	s.queue = nil
}

// call asks the policy for one batch and hands each request its move (or
// its error: an ItemErrors fails only the requests it names).
func (s *Sampler) call(batch []*pendingAct) {
	reqs := make([]ActRequest, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	// The call serves several branches: one of them giving up must not
	// cancel it for the others, so it runs under the sampler's context.
	moves, err := s.opts.Policy.ActBatch(s.ctx, reqs)
	var items ItemErrors
	perItem := errors.As(err, &items)
	if err == nil && len(moves) != len(reqs) {
		err = fmt.Errorf("batch policy returned %d moves for %d requests", len(moves), len(reqs))
	}
	s.mu.Lock()
	s.waiting -= len(batch)
	s.mu.Unlock()
	for i, p := range batch {
		switch {
		case perItem && items[i] != nil:
			p.reply <- actReply{err: items[i]}
		case err != nil && !perItem:
			p.reply <- actReply{err: err}
		case i < len(moves):
			p.reply <- actReply{move: moves[i]}
		default:
			p.reply <- actReply{err: fmt.Errorf("batch policy returned %d moves for %d requests", len(moves), len(reqs))}
		}
	}
}

// lockstep samples bs in rounds (SamplerOptions.Lockstep) and returns each
// branch's error (ctx's, when it ended).
func (s *Sampler) lockstep(ctx context.Context, bs []*Branch) []error {
	errs := make([]error, len(bs))
	s.inOrder(len(bs), func(i int) { errs[i] = s.restore(ctx, bs[i]) })
	for {
		var who []int
		for i, b := range bs {
			if errs[i] == nil && b.Err == nil && !b.Ended && len(b.Turns) < b.Lease.Turns {
				who = append(who, i)
			}
		}
		if len(who) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			for _, i := range who {
				errs[i] = fmt.Errorf("rollout: sampling interrupted: %w", err)
			}
			break
		}
		moves := s.round(ctx, bs, who)
		turns := make([]*model.Turn, len(who))
		s.inOrder(len(who), func(j int) {
			b := bs[who[j]]
			if moves[j].err != nil {
				errs[who[j]] = s.failed(ctx, b, "policy", moves[j].err)
				return
			}
			mv := moves[j].move
			obs, err := b.Episode.Step(ctx, b.Key(), mv)
			if err != nil {
				errs[who[j]] = s.failed(ctx, b, "env", err)
				return
			}
			t := s.turn(mv, obs)
			b.Turns = append(b.Turns, t)
			b.Ended = obs.Done
			turns[j] = &t
		})
		for j, t := range turns {
			if b := bs[who[j]]; t != nil && b.OnTurn != nil {
				b.OnTurn(b, *t)
			}
		}
	}
	s.inOrder(len(bs), func(i int) {
		if errs[i] == nil && bs[i].Err == nil {
			errs[i] = s.score(ctx, bs[i])
		}
	})
	return errs
}

// round asks the policy for the next move of bs[who...], in calls of at
// most MaxBatch issued concurrently.
func (s *Sampler) round(ctx context.Context, bs []*Branch, who []int) []actReply {
	out := make([]actReply, len(who))
	per := len(who)
	if s.opts.MaxBatch > 0 {
		per = s.opts.MaxBatch
	}
	var wg sync.WaitGroup
	for lo := 0; lo < len(who); lo += per {
		hi := min(lo+per, len(who))
		reqs := make([]ActRequest, hi-lo)
		for k, i := range who[lo:hi] {
			b := bs[i]
			reqs[k] = ActRequest{Key: b.Key(), Task: b.Lease.Task, History: b.Path()}
		}
		s.mu.Lock()
		s.stats.PolicyCalls++
		s.stats.MaxBatch = max(s.stats.MaxBatch, len(reqs))
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			moves, err := s.opts.Policy.ActBatch(ctx, reqs)
			var items ItemErrors
			perItem := errors.As(err, &items)
			for k := range reqs {
				switch {
				case perItem && items[k] != nil:
					out[lo+k].err = items[k]
				case err != nil && !perItem:
					out[lo+k].err = err
				case len(moves) != len(reqs):
					out[lo+k].err = fmt.Errorf("batch policy returned %d moves for %d requests", len(moves), len(reqs))
				default:
					out[lo+k].move = moves[k]
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// inOrder runs fn(0..n-1) on at most Workers goroutines, handing out the
// indexes in order.
func (s *Sampler) inOrder(n int, fn func(int)) {
	workers := min(s.opts.Workers, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
