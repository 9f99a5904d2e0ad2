package tree

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/patrdb/patrdb/store"
)

// branch is a leased branch being advanced in memory.
type branch struct {
	lease   Lease
	history []store.Turn // the full path, inherited prefix included
	ep      Episode
	pending []store.Turn // sampled under the lease, not yet submitted
	sampled int          // turns sampled under the lease
	ended   bool         // the episode ended, or MaxTurns was reached
	score   *float64
	err     error // the interval failed; submitted as a failure
}

func (b *branch) key() TurnKey {
	k := b.lease.Key
	k.Index += b.sampled
	k.Path += b.sampled
	return k
}

// fresh reports whether b is where lease l starts: the same node, attempt
// and path, so its history and episode can be reused.
func (b *branch) fresh(l Lease) bool {
	return b.lease.Node == l.Node && b.lease.Attempt == l.Attempt && len(b.history) == l.PathLen && b.err == nil
}

// drive advances every open group of step wave by wave until all are
// closed: lease every branch that needs work, sample its interval in
// batches, score it, submit the whole wave in one transaction, close the
// groups it finished.
func (e *Engine) drive(ctx context.Context, step uint64) (*StepResult, error) {
	res := &StepResult{Step: step}
	done, err := e.finishedGroups(step)
	if err != nil {
		return nil, err
	}
	live := map[uint64]*branch{} // node → branch kept in memory across waves
	for {
		if err := e.closeGroups(ctx, step, done, res); err != nil {
			return nil, err
		}
		leases, err := e.coord.Lease(LeaseRequest{Worker: e.opts.Worker, Step: step}, nil)
		if err != nil {
			return nil, err
		}
		if len(leases) == 0 {
			break
		}
		wave, err := e.wave(ctx, live, leases)
		if err != nil {
			return nil, err
		}
		acc := &Submitted{}
		n, err := e.advance(ctx, step, wave, acc, res)
		res.EnvSteps += n
		if err != nil {
			return nil, err
		}
		if err := e.scoreWave(ctx, wave); err != nil {
			return nil, err
		}
		sub, err := e.submit(wave, false)
		if err != nil {
			return nil, err
		}
		merge(sub, acc)
		done = sub.Done
		e.settle(live, sub, res)
		if e.opts.OnInterval != nil {
			e.opts.OnInterval(step, wave[0].lease.Interval, n)
		}
	}
	st, err := e.status(step)
	if err != nil {
		return nil, err
	}
	open := st.Open
	if open > 0 {
		// Every branch is leased elsewhere (another worker of this run).
		return res, fmt.Errorf("%w: step %d has %d open groups whose branches other workers hold", ErrConflict, step, open)
	}
	sort.Slice(res.Groups, func(i, j int) bool { return res.Groups[i].Group.ID < res.Groups[j].Group.ID })
	return res, nil
}

// finishedGroups lists the open groups of step without an active branch:
// a crash between their last interval and their close.
func (e *Engine) finishedGroups(step uint64) ([]uint64, error) {
	st, err := e.status(step)
	return st.Done, err
}

func (e *Engine) status(step uint64) (st StepStatus, err error) {
	err = e.db.View(func(tx *store.Tx) error {
		st, err = e.coord.Status(tx, step)
		return err
	})
	return st, err
}

// wave pairs each lease with its in-memory branch: the one kept from the
// last wave when it stands exactly where the lease starts, else one
// rebuilt from the store (history read, episode restored).
func (e *Engine) wave(ctx context.Context, live map[uint64]*branch, leases []Lease) ([]*branch, error) {
	wave := make([]*branch, len(leases))
	var load, restore []int
	for i, l := range leases {
		if b := live[l.Node]; b != nil && b.fresh(l) {
			b.lease, b.pending, b.sampled, b.ended, b.score = l, b.pending[:0], 0, false, nil
			wave[i] = b
			if b.ep == nil { // a new child: its episode starts from the parent's state
				restore = append(restore, i)
			}
			continue
		}
		load = append(load, i)
	}
	if err := e.parallel(len(restore), func(j int) error {
		b := wave[restore[j]]
		ep, err := e.restore(ctx, b.lease.Task, b.history, b.lease.EnvState)
		if err != nil {
			return fmt.Errorf("tree: restoring child %d: %w", b.lease.Node, err)
		}
		b.ep = ep
		return nil
	}); err != nil {
		return nil, err
	}
	if len(load) > 0 {
		hists := make([][]store.Turn, len(load))
		if err := e.db.View(func(tx *store.Tx) error {
			r, err := tx.Run(e.run)
			if err != nil {
				return err
			}
			for j, i := range load {
				path, err := r.Trajectory(leases[i].Node)
				if err != nil {
					return err
				}
				h := make([]store.Turn, len(path))
				for k := range path {
					h[k] = path[k].Turn
				}
				hists[j] = h
			}
			return nil
		}); err != nil {
			return nil, err
		}
		err := e.parallel(len(load), func(j int) error {
			l := leases[load[j]]
			ep, err := e.restore(ctx, l.Task, hists[j], l.EnvState)
			if err != nil {
				return fmt.Errorf("tree: restoring node %d: %w", l.Node, err)
			}
			wave[load[j]] = &branch{lease: l, history: hists[j], ep: ep}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for _, b := range wave {
		live[b.lease.Node] = b
	}
	return wave, nil
}

func (e *Engine) restore(ctx context.Context, task Task, hist []store.Turn, state []byte) (Episode, error) {
	if len(hist) == 0 && state == nil {
		return e.opts.Env.Reset(ctx, task)
	}
	return e.opts.Env.Restore(ctx, task, hist, state)
}

// parallel runs fn(0..n-1) on at most Workers goroutines and returns the
// first error.
func (e *Engine) parallel(n int, fn func(int) error) error {
	if n == 0 {
		return nil
	}
	workers := min(e.opts.Workers, n)
	next := make(chan int)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// interrupted turns a failed call into the step's error when the context
// ended (the failure is the cancellation's, not the branch's).
func interrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("tree: rollout interrupted: %w (%w)", cerr, err)
	}
	return nil
}

// advance samples the wave's interval round by round: one batched policy
// call (per MaxBatch requests) for every branch that still needs a turn,
// then every env step concurrently. Under CommitTurn each round is
// submitted as it completes.
func (e *Engine) advance(ctx context.Context, step uint64, wave []*branch, acc *Submitted, res *StepResult) (sampled int, err error) {
	maxTurns := e.opts.Config.MaxTurns
	// Under CommitTurn each round's turns commit while the next round
	// samples; wait collects the commit in flight, and closes the groups it
	// finished before anything else is written.
	type committed struct {
		sub *Submitted
		err error
	}
	var inflight chan committed
	wait := func() error {
		if inflight == nil {
			return nil
		}
		c := <-inflight
		inflight = nil
		if c.err != nil {
			return c.err
		}
		// A group whose last branch ended in that round closes now, as a
		// resume after a crash here would close it first.
		if err := e.closeGroups(ctx, step, c.sub.Done, res); err != nil {
			return err
		}
		c.sub.Done = nil
		merge(acc, c.sub)
		return nil
	}
	defer func() {
		if werr := wait(); err == nil {
			err = werr
		}
	}()
	for {
		var who []*branch
		for _, b := range wave {
			if !b.ended && b.err == nil && b.sampled < b.lease.Turns {
				who = append(who, b)
			}
		}
		if len(who) == 0 {
			return sampled, nil
		}
		if err := ctx.Err(); err != nil {
			return sampled, fmt.Errorf("tree: rollout interrupted: %w", err)
		}
		moves := make([]Move, len(who))
		failed := make([]error, len(who))
		per := len(who)
		if e.opts.MaxBatch > 0 {
			per = e.opts.MaxBatch
		}
		for lo := 0; lo < len(who); lo += per {
			hi := min(lo+per, len(who))
			reqs := make([]ActRequest, hi-lo)
			for i, b := range who[lo:hi] {
				reqs[i] = ActRequest{Key: b.key(), Task: b.lease.Task, History: b.history}
			}
			res.PolicyCalls++
			res.MaxBatch = max(res.MaxBatch, len(reqs))
			out, err := e.policy.ActBatch(ctx, reqs)
			if err != nil {
				if ierr := interrupted(ctx, err); ierr != nil {
					return sampled, ierr
				}
				items, perItem := err.(ItemErrors)
				for i := range reqs {
					switch {
					case !perItem:
						failed[lo+i] = fmt.Errorf("policy: %w", err)
					case items[i] != nil:
						failed[lo+i] = fmt.Errorf("policy: %w", items[i])
					}
				}
			}
			if len(out) != len(reqs) && err == nil {
				return sampled, fmt.Errorf("%w: batch policy returned %d moves for %d requests", store.ErrInvalid, len(out), len(reqs))
			}
			copy(moves[lo:hi], out)
		}
		err := e.parallel(len(who), func(i int) error {
			b := who[i]
			if failed[i] != nil {
				b.err = failed[i]
				return nil
			}
			mv := moves[i]
			obs, err := b.ep.Step(ctx, b.key(), mv)
			if err != nil {
				if ierr := interrupted(ctx, err); ierr != nil {
					return ierr
				}
				b.err = fmt.Errorf("env: %w", err)
				return nil
			}
			v := mv.PolicyVersion
			if v == 0 {
				v = e.opts.PolicyVersion
			}
			t := store.Turn{Action: mv.Text, ActionTokens: mv.Tokens, ActionLogprobs: mv.Logprobs,
				Observation: obs.Text, ObservationTokens: obs.Tokens, Reward: obs.Reward, Done: obs.Done, PolicyVersion: v}
			b.history = append(b.history, t)
			b.pending = append(b.pending, t)
			b.sampled++
			b.ended = obs.Done || (maxTurns > 0 && len(b.history) >= maxTurns)
			return nil
		})
		for _, b := range who {
			if b.err == nil {
				sampled++
			}
		}
		if err != nil {
			return sampled, err
		}
		if e.opts.Commit == CommitTurn {
			if err := wait(); err != nil {
				return sampled, err
			}
			batch, err := e.prepare(wave, true)
			if err != nil {
				return sampled, err
			}
			ch := make(chan committed, 1)
			go func() {
				sub, err := e.commit(batch)
				ch <- committed{sub, err}
			}()
			inflight = ch
		}
	}
}

// scoreWave scores, concurrently, every branch whose lease wants a score
// and that sampled its whole interval without ending.
func (e *Engine) scoreWave(ctx context.Context, wave []*branch) error {
	var who []*branch
	for _, b := range wave {
		if b.lease.Score && !b.ended && b.err == nil && b.sampled == b.lease.Turns {
			who = append(who, b)
		}
	}
	return e.parallel(len(who), func(i int) error {
		b := who[i]
		s, err := e.opts.Scorer.Score(ctx, b.lease.Task, b.history)
		switch {
		case err != nil:
			if ierr := interrupted(ctx, err); ierr != nil {
				return ierr
			}
			b.err = fmt.Errorf("scorer: %w", err)
		case !(s >= 0 && s <= 1):
			b.err = fmt.Errorf("scorer: returned %v for node %d, want a score in [0,1]", s, b.lease.Node)
		default:
			b.score = &s
		}
		return nil
	})
}

// submit encodes every branch's pending turns (concurrently, outside the
// write lock) and submits the wave in one transaction. partial submits
// turns only (CommitTurn's rounds); the final submit carries scores and
// failures too.
func (e *Engine) submit(wave []*branch, partial bool) (*Submitted, error) {
	batch, err := e.prepare(wave, partial)
	if err != nil {
		return nil, err
	}
	return e.commit(batch)
}

// prepare builds and encodes the wave's submissions, and hands each
// branch's pending turns over to them, so the next round may sample while
// they commit.
func (e *Engine) prepare(wave []*branch, partial bool) ([]Submission, error) {
	subs := make([]Submission, len(wave))
	use := make([]bool, len(wave))
	err := e.parallel(len(wave), func(i int) error {
		b := wave[i]
		if b.err != nil {
			if !partial {
				subs[i], use[i] = Submission{Lease: b.lease.ID, Node: b.lease.Node, Error: b.err.Error()}, true
			}
			return nil
		}
		s := Submission{Lease: b.lease.ID, Node: b.lease.Node, From: b.lease.From + b.sampled - len(b.pending), Turns: b.pending}
		if len(b.pending) > 0 {
			if err := encodeSubmission(&s); err != nil {
				// The policy or env produced a turn the store refuses.
				b.err = fmt.Errorf("turn: %w", err)
				if !partial {
					subs[i], use[i] = Submission{Lease: b.lease.ID, Node: b.lease.Node, Error: b.err.Error()}, true
				}
				return nil
			}
			s.EnvState = b.ep.State()
		}
		if !partial {
			s.Score = b.score
		}
		subs[i], use[i] = s, len(b.pending) > 0 || s.Score != nil
		b.pending = nil
		return nil
	})
	if err != nil {
		return nil, err
	}
	var batch []Submission
	for i, s := range subs {
		if use[i] {
			batch = append(batch, s)
		}
	}
	return batch, nil
}

// commit submits prepared submissions in one transaction.
func (e *Engine) commit(batch []Submission) (*Submitted, error) {
	if len(batch) == 0 {
		return &Submitted{}, nil
	}
	var out *Submitted
	err := e.db.Update(func(tx *store.Tx) (err error) {
		out, err = e.coord.Submit(tx, batch)
		return err
	})
	return out, err
}

// merge adds the outcome of an earlier submit of the same wave (a
// CommitTurn round) before s's.
func merge(s, earlier *Submitted) {
	s.Results = append(append([]SubmitResult(nil), earlier.Results...), s.Results...)
	s.Routed = append(append([]Routing(nil), earlier.Routed...), s.Routed...)
	s.Done = append(append([]uint64(nil), earlier.Done...), s.Done...)
}

// settle moves the in-memory branches to the state just committed: ended,
// failed and pruned branches leave, expanded ones hand their history to
// their children, survivors stay for the next wave.
func (e *Engine) settle(live map[uint64]*branch, sub *Submitted, res *StepResult) {
	for _, r := range sub.Results {
		switch {
		case r.Retry:
			res.Retries++
			delete(live, r.Node) // rebuilt from its stored turns
		case r.Status == store.NodeFailed:
			res.Failed++
			delete(live, r.Node)
		case r.Status != store.NodeActive:
			delete(live, r.Node)
		}
	}
	for _, rt := range sub.Routed {
		for _, d := range rt.Decisions {
			parent := live[d.Node]
			if d.Action != Survive {
				delete(live, d.Node)
			}
			if d.Action != Expand || parent == nil {
				continue
			}
			for _, id := range d.ChildIDs {
				// The child starts where its parent stands; its episode is
				// restored from the parent's state when it is leased.
				live[id] = &branch{lease: Lease{Node: id, PathLen: len(parent.history)},
					history: append([]store.Turn(nil), parent.history...)}
			}
		}
	}
}
