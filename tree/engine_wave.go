package tree

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Barrier is what a branch that finished its interval waits for before
// its group is routed and its next interval leased.
type Barrier int

const (
	// BarrierGroup: a group routes as soon as its own branches are through
	// their interval; the others go on. Submits are committed as branches
	// finish (many per transaction), so one slow tool call holds up its own
	// tree alone. Trees are those of BarrierStep; node ids, given in the
	// order groups route, may differ from run to run.
	BarrierGroup Barrier = iota
	// BarrierStep: every branch of the step finishes its interval before any
	// group routes: one commit per wave (and, under CommitTurn, one per
	// round of turns), in step, group and node order, so a run gives the
	// same node ids and event log every time — what reproducible demos and
	// record-for-record resume tests need.
	BarrierStep
)

// member is a branch the engine keeps in memory across its intervals:
// its path so far and its running episode.
type member struct {
	lease   rollout.Lease
	history []model.Turn // the full path, inherited prefix included
	ep      rollout.Episode
}

// flight is one leased branch being sampled, and what has been handed to
// the committer of its turns so far.
type flight struct {
	rollout.Branch
	order    int  // its place in its wave (BarrierStep commits in this order)
	queued   int  // turns already handed over in partial submissions
	reported int  // turns reported as partial news (BarrierStep's rounds)
	finished bool // through its interval (BarrierStep's rounds)
}

// news is what a flight reports to the driver: a round's turn (partial, a
// turn under CommitTurn) or its end.
type news struct {
	f       *flight
	partial bool
	turn    model.Turn
	state   []byte // the episode's state right after turn
	err     error  // the context ended
}

// drive grows every open group of step until all are closed: lease every
// branch that needs work, sample each on its own, commit what finishes,
// route the groups whose intervals complete, lease their next branches,
// close the groups that finish.
func (e *Engine) drive(ctx context.Context, step uint64) (*StepResult, error) {
	d, err := e.newDriver(ctx, step)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	return d.run()
}

// driver is one drive of one step.
type driver struct {
	e       *Engine
	ctx     context.Context
	cancel  context.CancelFunc
	step    uint64
	res     *StepResult
	sampler *rollout.Sampler
	live    map[uint64]*member // node → its branch kept in memory across intervals
	news    chan news
	flying  map[uint64]*flight // node → its branch being sampled
	quit    chan struct{}      // closed when the drive is over
	hb      sync.WaitGroup

	mu     sync.Mutex
	leases []string // ids of the leases in flight, for the heartbeat

	waveTurns int // turns committed since the last OnInterval

	// Dynamic sampling (RolloutInformative): what the step wants, the
	// tasks it opened, and whether More ran dry.
	sampling  *Sampling
	opened    []rollout.Task
	exhausted bool
}

// send reports news to the drive, unless the drive is over. News is never
// dropped while the drive runs, even after its context ended: a round of
// turns is committed whole or not at all.
func (d *driver) send(n news) {
	select {
	case d.news <- n:
	case <-d.quit:
	}
}

func (e *Engine) newDriver(ctx context.Context, step uint64) (*driver, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := rollout.NewSampler(ctx, rollout.SamplerOptions{Policy: e.policy, Env: e.opts.Env, Scorer: e.opts.Scorer,
		MaxBatch: e.opts.MaxBatch, Workers: e.opts.Workers, Linger: e.opts.Linger, PolicyVersion: e.opts.PolicyVersion,
		Lockstep: e.opts.Barrier == BarrierStep})
	if err != nil {
		cancel()
		return nil, err
	}
	d := &driver{e: e, ctx: ctx, cancel: cancel, step: step, res: &StepResult{Step: step}, sampler: s,
		live: map[uint64]*member{}, news: make(chan news, 64), flying: map[uint64]*flight{}, quit: make(chan struct{})}
	d.hb.Add(1)
	go d.heartbeat()
	return d, nil
}

// stop ends the heartbeat and every branch still sampling.
func (d *driver) stop() {
	close(d.quit)
	d.cancel()
	d.hb.Wait()
}

// heartbeat renews the leases in flight while their tools run.
func (d *driver) heartbeat() {
	defer d.hb.Done()
	t := time.NewTicker(rollout.HeartbeatEvery(d.e.coord.opts.LeaseTTL))
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
			d.mu.Lock()
			ids := append([]string(nil), d.leases...)
			d.mu.Unlock()
			d.e.coord.Renew(d.e.opts.Worker, ids)
		}
	}
}

func (d *driver) run() (*StepResult, error) {
	e := d.e
	done, err := e.finishedGroups(d.step)
	if err != nil {
		return nil, err
	}
	if err := d.close(done); err != nil {
		return nil, err
	}
	for {
		if _, err := d.topUp(); err != nil {
			return nil, err
		}
		started, err := d.lease()
		if err != nil {
			return nil, err
		}
		if started == 0 && len(d.flying) == 0 {
			wait, err := d.idle()
			if err != nil || !wait {
				return d.res, err
			}
			continue
		}
		batch, interval, err := d.collect()
		if err != nil {
			return nil, err
		}
		sub, err := e.commit(batch)
		if err != nil {
			return nil, err
		}
		d.tally(batch.subs, sub, interval)
		if err := d.settle(sub); err != nil {
			return nil, err
		}
	}
}

// idle runs when nothing is in flight and nothing could be leased: it
// expires overdue deferred work and reports whether the step still waits
// for rewards or scores from elsewhere (then it sleeps a poll first).
func (d *driver) idle() (bool, error) {
	e := d.e
	if e.coord.Overdue() {
		var sub *rollout.Submitted
		if err := e.db.Update(func(tx *store.Tx) (err error) {
			sub, err = e.coord.Expire(tx)
			return err
		}); err != nil {
			return false, err
		}
		if err := d.settle(sub); err != nil {
			return false, err
		}
		return true, nil
	}
	st, err := e.status(d.step)
	if err != nil {
		return false, err
	}
	if len(st.Done) > 0 {
		return true, d.close(st.Done)
	}
	switch {
	case st.Open == 0:
		sort.Slice(d.res.Groups, func(i, j int) bool { return d.res.Groups[i].Group.ID < d.res.Groups[j].Group.ID })
		return false, nil
	case st.Leased > 0 && st.AwaitingRewards == 0 && st.AwaitingScores == 0:
		// Every branch is leased elsewhere (another worker of this run).
		return false, fmt.Errorf("%w: step %d has %d open groups whose branches other workers hold", rollout.ErrConflict, d.step, st.Open)
	}
	// Rewards or scores are due from elsewhere, or one just arrived and
	// opened new work since the lease above: look again after a poll.
	select {
	case <-d.ctx.Done():
		return false, fmt.Errorf("tree: rollout interrupted while %d rewards and %d scores were pending: %w", st.AwaitingRewards, st.AwaitingScores, d.ctx.Err())
	case <-time.After(e.opts.Poll):
	}
	return true, nil
}

// lease takes every branch of the step that needs work and no one holds,
// and starts sampling it. Under BarrierStep it leases only when nothing is
// in flight: a wave at a time.
func (d *driver) lease() (int, error) {
	e := d.e
	if e.opts.Barrier == BarrierStep && len(d.flying) > 0 {
		return 0, nil
	}
	leases, err := e.coord.Lease(LeaseRequest{Worker: e.opts.Worker, Step: d.step, PolicyVersion: e.opts.PolicyVersion}, nil)
	if err != nil || len(leases) == 0 {
		return 0, err
	}
	wave, err := d.members(leases)
	if err != nil {
		return 0, err
	}
	fs := make([]*rollout.Branch, len(wave))
	byBranch := make(map[*rollout.Branch]*flight, len(wave))
	d.mu.Lock()
	for i, m := range wave {
		f := &flight{Branch: rollout.Branch{Lease: m.lease, History: m.history, Episode: m.ep}, order: i}
		if e.opts.Commit == CommitTurn {
			f.OnTurn = func(b *rollout.Branch, t model.Turn) {
				d.send(news{f: f, partial: true, turn: t, state: b.Episode.State()})
			}
		}
		d.flying[m.lease.Node] = f
		d.leases = append(d.leases, m.lease.ID)
		fs[i] = &f.Branch
		byBranch[fs[i]] = f
	}
	d.mu.Unlock()
	d.sampler.Go(d.ctx, fs, func(b *rollout.Branch, err error) { d.send(news{f: byBranch[b], err: err}) })
	return len(wave), nil
}

// members pairs each lease with its in-memory branch: the one kept from
// its last interval when it stands exactly where the lease starts, a new
// child that starts from its parent's path, or one rebuilt from the store
// (history read; the sampler restores its episode).
func (d *driver) members(leases []rollout.Lease) ([]*member, error) {
	wave := make([]*member, len(leases))
	var load []int
	for i, l := range leases {
		if m := d.live[l.Node]; m != nil && m.lease.Node == l.Node && m.lease.Attempt == l.Attempt && len(m.history) == l.PathLen {
			m.lease = l
			wave[i] = m
			continue
		}
		load = append(load, i)
	}
	if len(load) > 0 {
		if err := d.e.db.View(func(tx *store.Tx) error {
			r, err := tx.Run(d.e.run)
			if err != nil {
				return err
			}
			for _, i := range load {
				path, err := r.Trajectory(leases[i].Node)
				if err != nil {
					return err
				}
				h := make([]model.Turn, len(path))
				for k := range path {
					h[k] = path[k].Turn
				}
				wave[i] = &member{lease: leases[i], history: h}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, m := range wave {
		d.live[m.lease.Node] = m
	}
	return wave, nil
}

// collect waits for branches to finish and returns their submissions (and
// any partial turns reported before them), ready to commit: under
// BarrierStep once every branch in flight is through (and, under
// CommitTurn, each round as soon as every branch still sampling has
// reported it); under BarrierGroup whatever finished by the time the first
// one did and the news drained.
func (d *driver) collect() (prepared, int, error) {
	var finished []*flight
	var partial []news
	take := func(n news) error {
		if n.err != nil {
			return n.err
		}
		if n.partial {
			partial = append(partial, n)
			return nil
		}
		finished = append(finished, n.f)
		return nil
	}
	if d.e.opts.Barrier == BarrierStep {
		return d.collectWave(take, &finished, &partial)
	}
	if err := d.next(take); err != nil {
		return prepared{}, 0, err
	}
	for more := true; more; {
		select {
		case n := <-d.news:
			if err := take(n); err != nil {
				return prepared{}, 0, d.interrupted(err)
			}
		default:
			more = false
		}
	}
	return d.submissions(partial, finished)
}

// collectWave is collect under BarrierStep: it waits for the whole wave,
// committing each round of partial turns (CommitTurn) as soon as every
// branch of the wave has sampled it or finished, in wave order.
func (d *driver) collectWave(take func(news) error, finished *[]*flight, partial *[]news) (prepared, int, error) {
	var rounds [][]news // partial turns by their index in the interval
	next := 0           // the first round not committed
	flush := func(all bool) error {
		for ; next < len(rounds); next++ {
			if !all && !d.roundDone(next) {
				return nil
			}
			round := rounds[next]
			sort.Slice(round, func(i, j int) bool { return round[i].f.order < round[j].f.order })
			subs, _, err := d.submissions(round, nil)
			if err != nil {
				return err
			}
			sub, err := d.e.commit(subs)
			if err != nil {
				return err
			}
			d.tally(subs.subs, nil, 0)
			// A group whose last branch ended in this round closes now, as
			// a resume after a crash here would close it first.
			if err := d.close(sub.Done); err != nil {
				return err
			}
		}
		return nil
	}
	for len(*finished) < len(d.flying) {
		if err := d.next(take); err != nil {
			return prepared{}, 0, err
		}
		for _, n := range *partial {
			r := n.f.reported
			n.f.reported++
			for len(rounds) <= r {
				rounds = append(rounds, nil)
			}
			rounds[r] = append(rounds[r], n)
		}
		*partial = (*partial)[:0]
		for _, f := range *finished {
			f.finished = true
		}
		if err := flush(false); err != nil {
			return prepared{}, 0, err
		}
	}
	if err := flush(true); err != nil {
		return prepared{}, 0, err
	}
	return d.submissions(nil, *finished)
}

// roundDone reports whether every branch in flight has sampled turn r of
// its interval, or finished.
func (d *driver) roundDone(r int) bool {
	for _, f := range d.flying {
		if !f.finished && f.reported <= r {
			return false
		}
	}
	return true
}

// next waits for one piece of news. Every branch in flight reports, also
// when the drive's context ends (the sampler fails it with the context's
// error), so the drive never leaves work behind that a branch finished
// before the end: a wave's last round is committed whole or not at all.
func (d *driver) next(take func(news) error) error {
	if err := take(<-d.news); err != nil {
		return d.interrupted(err)
	}
	return nil
}

// interrupted ends the drive after the context ended under a branch.
func (d *driver) interrupted(err error) error {
	return fmt.Errorf("tree: rollout interrupted: %w", err)
}

// submissions turns partial turns and finished branches into submissions
// (turns encoded outside the write lock), in the order a wave commits them:
// partial turns first, in the order reported; finished branches in wave
// order, each with the turns it has not handed over yet. interval is the
// first finished branch's (for OnInterval).
func (d *driver) submissions(partial []news, finished []*flight) (p prepared, interval int, err error) {
	var subs []rollout.Submission
	e := d.e
	for _, n := range partial {
		f := n.f
		subs = append(subs, rollout.Submission{Lease: f.Lease.ID, Worker: e.opts.Worker, Node: f.Lease.Node, From: f.Lease.From + f.queued,
			Turns: []model.Turn{n.turn}, EnvState: n.state, RewardPending: e.opts.DeferRewards})
		f.queued++
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].order < finished[j].order })
	if len(finished) > 0 {
		interval = finished[0].Lease.Interval
	}
	for _, f := range finished {
		s := rollout.Submission{Lease: f.Lease.ID, Worker: e.opts.Worker, Node: f.Lease.Node, From: f.Lease.From + f.queued}
		if f.Err != nil {
			s.Error = f.Err.Error()
		} else {
			s.Turns, s.Score = f.Turns[f.queued:], f.Score
			if len(s.Turns) > 0 {
				s.EnvState = f.Episode.State()
				s.RewardPending = e.opts.DeferRewards
			}
		}
		f.queued = len(f.Turns)
		d.land(f)
		if s.Error == "" && len(s.Turns) == 0 && s.Score == nil {
			continue
		}
		subs = append(subs, s)
	}
	return d.encode(subs), interval, nil
}

// prepared are submissions with their turns encoded ahead: enc[i] holds
// subs[i]'s (Coordinator.SubmitEncoded).
type prepared struct {
	subs []rollout.Submission
	enc  []store.EncodedTurns
}

// land takes a finished branch out of flight, keeping its path and episode
// for its next interval.
func (d *driver) land(f *flight) {
	delete(d.flying, f.Lease.Node)
	d.mu.Lock()
	for i, id := range d.leases {
		if id == f.Lease.ID {
			d.leases = append(d.leases[:i], d.leases[i+1:]...)
			break
		}
	}
	d.mu.Unlock()
	if m := d.live[f.Lease.Node]; m != nil {
		m.history, m.ep = f.Path(), f.Episode
		if f.Err != nil {
			delete(d.live, f.Lease.Node) // rebuilt from its stored turns if it is retried
		}
	}
}

// encode validates and encodes every submission's turns concurrently; a
// branch whose turns the store refuses is submitted as that branch's
// failure instead, like any policy or env failure.
func (d *driver) encode(subs []rollout.Submission) prepared {
	enc := make([]store.EncodedTurns, len(subs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, d.e.opts.Workers))
	refused := make([]bool, len(subs))
	for i := range subs {
		if len(subs[i].Turns) == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var err error
			if enc[i], err = encodeTurns(&subs[i]); err != nil {
				s := &subs[i]
				*s = rollout.Submission{Lease: s.Lease, Worker: s.Worker, Node: s.Node, Error: "turn: " + err.Error()}
				refused[i] = true
			}
		}()
	}
	wg.Wait()
	for i, r := range refused {
		if r {
			delete(d.live, subs[i].Node) // rebuilt from its stored turns if it is retried
		}
	}
	return prepared{subs: subs, enc: enc}
}

// tally adds committed work to the step's result; a final commit (sub not
// nil) of a wave, or of whatever finished, also reports to OnInterval.
func (d *driver) tally(subs []rollout.Submission, sub *rollout.Submitted, interval int) {
	for _, s := range subs {
		d.res.EnvSteps += len(s.Turns)
		d.waveTurns += len(s.Turns)
	}
	st := d.sampler.Stats()
	d.res.PolicyCalls, d.res.MaxBatch = st.PolicyCalls, st.MaxBatch
	if sub == nil {
		return
	}
	if d.e.opts.OnInterval != nil && (len(subs) > 0 || d.e.opts.Barrier == BarrierStep) {
		d.e.opts.OnInterval(d.step, interval, d.waveTurns)
	}
	d.waveTurns = 0
}

// settle moves the in-memory branches to the state just committed and
// closes the groups it finished: ended, failed and pruned branches leave,
// expanded ones hand their path to their children, survivors stay.
func (d *driver) settle(sub *rollout.Submitted) error {
	for _, r := range sub.Results {
		switch {
		case r.Retry:
			d.res.Retries++
			delete(d.live, r.Node) // rebuilt from its stored turns
		case r.Status == model.NodeFailed:
			d.res.Failed++
			delete(d.live, r.Node)
		case r.Status != model.NodeActive:
			delete(d.live, r.Node)
		}
	}
	for _, rt := range sub.Routed {
		for _, dec := range rt.Decisions {
			parent := d.live[dec.Node]
			if dec.Action != model.ActionSurvive {
				delete(d.live, dec.Node)
			}
			if dec.Action != model.ActionExpand || parent == nil {
				continue
			}
			for _, id := range dec.ChildIDs {
				// The child starts where its parent stands; its episode is
				// restored from the parent's state when it is leased.
				d.live[id] = &member{lease: rollout.Lease{Node: id, PathLen: len(parent.history)},
					history: append([]model.Turn(nil), parent.history...)}
			}
		}
	}
	return d.close(sub.Done)
}

// close closes finished groups (Engine.closeGroups), recording the ones a
// dynamically sampled step filters out.
func (d *driver) close(groups []uint64) error {
	return d.e.closeGroups(d.ctx, d.step, groups, d.res, d.sampling != nil)
}

// finishedGroups lists the open groups of step with nothing left to wait
// for: a crash between their last interval and their close.
func (e *Engine) finishedGroups(step uint64) ([]uint64, error) {
	st, err := e.status(step)
	return st.Done, err
}

func (e *Engine) status(step uint64) (st rollout.StepStatus, err error) {
	err = e.db.View(func(tx *store.Tx) error {
		st, err = e.coord.Status(tx, step)
		return err
	})
	return st, err
}

// commit submits prepared submissions in one transaction.
func (e *Engine) commit(batch prepared) (*rollout.Submitted, error) {
	if len(batch.subs) == 0 {
		return &rollout.Submitted{}, nil
	}
	var out *rollout.Submitted
	err := e.db.Update(func(tx *store.Tx) (err error) {
		out, err = e.coord.SubmitEncoded(tx, batch.subs, batch.enc)
		return err
	})
	return out, err
}
