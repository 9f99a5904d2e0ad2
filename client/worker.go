package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// Worker grows a step's branches over HTTP, as one of any number of
// worker processes: it leases branches and samples each on its own with
// the sampling loop the in-process engine runs (rollout.Sampler: policy
// calls batched across every branch waiting for one, env steps and scorer
// calls concurrent up to Workers), submitting each branch as soon as it is
// through its interval and leasing more as it frees up. While a branch's
// tool runs, a heartbeat renews its lease every 0.4 TTL, so a TTL of tens
// of seconds outlives tool calls of minutes and a dead worker's branches
// return within three heartbeats.
//
// It keeps no rule of its own — the server's coordinator decides what each
// lease asks for and routes the groups — and no state between leases, so
// it may be killed at any point: its leases expire and go to another
// worker, and what it had not submitted is sampled again from the last
// committed turn.
type Worker struct {
	Client *Client
	Run    string
	Name   string // on its leases; required (a lease is bound to its worker)
	Policy rollout.BatchPolicy
	Env    rollout.Env
	Scorer rollout.Scorer // nil when the run does not score (NoScoring) or a remote scorer does
	// Max is how many branches the worker holds at once (0: 16); TTL how
	// long the server keeps each without a heartbeat (0: the server's
	// default, 30 s).
	Max int
	TTL time.Duration
	// Workers bounds env steps, restores and scorer calls in flight (0:
	// Max); MaxBatch the requests of one policy call (0: no cap; a larger
	// batch is split into concurrent calls); Linger how long a policy batch
	// waits for more branches, and a submit for more branches to finish
	// (0: rollout.DefaultLinger).
	Workers  int
	MaxBatch int
	Linger   time.Duration
	// PolicyVersion is the version of the weights the worker samples with,
	// sent with its lease requests and recorded on turns whose Move
	// carries none.
	PolicyVersion uint64
	// EachTurn submits every turn as it is sampled (durable at once, and a
	// sign of life), not only each branch's whole interval.
	EachTurn bool
	// DeferRewards ends each branch with its outcome reward pending, for a
	// verifier or remote reward model to deliver (see Verifier).
	DeferRewards bool
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
	MaxBatch    int
	Lost        int // branches whose work was refused (lease lost, branch ended) and dropped
}

// held is one leased branch being sampled.
type held struct {
	rollout.Branch
	cancel context.CancelFunc
	sent   int // turns already submitted (EachTurn)
}

// report is a branch's news to the worker's loop: a turn (EachTurn) or
// its end.
type report struct {
	b     *held
	turn  *model.Turn // a turn sampled (EachTurn), with the state after it
	state []byte
	err   error
}

// Work grows step until it has no active branch left (every group done;
// closing them is the driver's), or ctx ends. On return it releases every
// lease it still holds, so another worker takes them at once.
func (w *Worker) Work(ctx context.Context, step uint64) (WorkStats, error) {
	ws, err := w.start(ctx)
	if err != nil {
		return WorkStats{}, err
	}
	defer ws.stop()
	err = ws.run(step)
	st := ws.sampler.Stats()
	ws.st.PolicyCalls, ws.st.MaxBatch = st.PolicyCalls, st.MaxBatch
	return ws.st, err
}

// workSession is one Work call.
type workSession struct {
	w       *Worker
	ctx     context.Context
	cancel  context.CancelFunc
	sampler *rollout.Sampler
	reports chan report
	quit    chan struct{}
	hb      sync.WaitGroup
	max     int
	poll    time.Duration
	st      WorkStats

	mu   sync.Mutex
	held map[string]*held // lease id → branch

	paths pathCache // the paths of branches this worker grew last (its loop's alone)
}

func (w *Worker) start(ctx context.Context) (*workSession, error) {
	if w.Name == "" {
		return nil, errors.New("patrdb client: a Worker needs a Name: leases are bound to the worker that took them")
	}
	max := w.Max
	if max == 0 {
		max = 16
	}
	workers := w.Workers
	if workers == 0 {
		workers = max
	}
	poll := w.Poll
	if poll == 0 {
		poll = 50 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := rollout.NewSampler(ctx, rollout.SamplerOptions{Policy: w.Policy, Env: w.Env, Scorer: w.Scorer,
		MaxBatch: w.MaxBatch, Workers: workers, Linger: w.Linger, PolicyVersion: w.PolicyVersion})
	if err != nil {
		cancel()
		return nil, err
	}
	ws := &workSession{w: w, ctx: ctx, cancel: cancel, sampler: s, reports: make(chan report, max), quit: make(chan struct{}),
		max: max, poll: poll, held: map[string]*held{}, paths: pathCache{limit: 4 * max}}
	ws.hb.Add(1)
	go ws.heartbeat()
	return ws, nil
}

// stop ends the heartbeat and every branch still sampling, and releases
// the leases still held.
func (ws *workSession) stop() {
	close(ws.quit)
	ws.cancel()
	ws.hb.Wait()
	ids := ws.ids()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = ws.w.Client.ReleaseLeases(ctx, ws.w.Run, api.LeasesRequest{Worker: ws.w.Name, Leases: ids})
}

func (ws *workSession) ids() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ids := make([]string, 0, len(ws.held))
	for id := range ws.held {
		ids = append(ids, id)
	}
	return ids
}

// heartbeat renews the leases held every 0.4 of their TTL, and stops the
// sampling of any the server says are gone.
func (ws *workSession) heartbeat() {
	defer ws.hb.Done()
	ttl := ws.w.TTL
	if ttl == 0 {
		ttl = rollout.DefaultLeaseTTL
	}
	every := rollout.HeartbeatEvery(ttl)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ws.ctx.Done():
			return
		case <-t.C:
		}
		ids := ws.ids()
		if len(ids) == 0 {
			continue
		}
		// Let a renewal that takes long not outlast the next one.
		ctx, cancel := context.WithTimeout(ws.ctx, every)
		states, err := ws.w.Client.RenewLeases(ctx, ws.w.Run, api.LeasesRequest{Worker: ws.w.Name, Leases: ids})
		cancel()
		if err != nil {
			continue // the next heartbeat tries again; the lease outlives one miss
		}
		ws.mu.Lock()
		for _, s := range states {
			if h := ws.held[s.ID]; h != nil && !s.Held {
				h.cancel() // lost: stop sampling it; its submit would be refused
			}
		}
		ws.mu.Unlock()
	}
}

func (ws *workSession) run(step uint64) error {
	w := ws.w
	wait := ws.poll
	for {
		if err := ws.ctx.Err(); err != nil {
			return err
		}
		if free := ws.max - len(ws.held); free > 0 {
			grants, err := w.Client.Lease(ws.ctx, w.Run, api.LeaseRequest{Worker: w.Name, Max: free, Step: step,
				TTLMs: w.TTL.Milliseconds(), PolicyVersion: w.PolicyVersion, Have: ws.paths.have()})
			switch {
			case err != nil && !transient(ws.ctx, err):
				return err
			case err != nil:
				if !sleep(ws.ctx, wait) {
					return ws.ctx.Err()
				}
				wait = min(2*wait, 2*time.Second)
				continue
			}
			wait = ws.poll
			ws.begin(grants)
		}
		if len(ws.held) == 0 {
			s, err := w.Client.StepStatus(ws.ctx, w.Run, step)
			if err == nil && s.Active == 0 {
				return nil
			}
			if err != nil && !transient(ws.ctx, err) {
				return err
			}
			if !sleep(ws.ctx, ws.poll) {
				return ws.ctx.Err()
			}
			continue
		}
		// Wait for news; with room for more branches, only for a poll, then
		// ask again: a branch another worker gives back (or whose lease ran
		// out) is taken while the held ones run long tool calls.
		var timeout <-chan time.Time
		if len(ws.held) < ws.max {
			timeout = time.After(ws.poll)
		}
		var got []report
		select {
		case r := <-ws.reports:
			got = append(got, r)
		case <-timeout:
			continue
		case <-ws.ctx.Done():
			return ws.ctx.Err()
		}
		got = ws.linger(got)
		if err := ws.submit(got); err != nil {
			return err
		}
	}
}

// linger adds to got the reports that arrive within the linger while
// branches it holds are still out: branches that finish together (their
// actions came from one policy call) go in one submit, which the server
// commits with one fsync, not one each.
func (ws *workSession) linger(got []report) []report {
	out := len(ws.held)
	for _, r := range got {
		if r.turn == nil {
			out--
		}
	}
	d := ws.w.Linger
	if d == 0 {
		d = rollout.DefaultLinger
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for out > 0 {
		select {
		case r := <-ws.reports:
			got = append(got, r)
			if r.turn == nil {
				out--
			}
		case <-t.C:
			out = 0
		case <-ws.ctx.Done():
			out = 0
		}
	}
	for more := true; more; {
		select {
		case r := <-ws.reports:
			got = append(got, r)
		default:
			more = false
		}
	}
	return got
}

// begin starts sampling the granted branches.
func (ws *workSession) begin(grants []api.LeaseGrant) {
	if len(grants) == 0 {
		return
	}
	ws.st.Leases += len(grants)
	for i := range grants {
		grants[i].History = ws.paths.complete(grants[i])
	}
	bs := make([]*rollout.Branch, len(grants))
	byBranch := make(map[*rollout.Branch]*held, len(grants))
	ws.mu.Lock()
	for i, g := range grants {
		ctx, cancel := context.WithCancel(ws.ctx)
		h := &held{Branch: rollout.Branch{Lease: g.Lease, History: g.History, Context: ctx}, cancel: cancel}
		if ws.w.EachTurn {
			h.OnTurn = func(b *rollout.Branch, t model.Turn) { ws.send(report{b: h, turn: &t, state: b.Episode.State()}) }
		}
		ws.held[g.ID] = h
		bs[i] = &h.Branch
		byBranch[bs[i]] = h
	}
	ws.mu.Unlock()
	ws.sampler.Go(ws.ctx, bs, func(b *rollout.Branch, err error) { ws.send(report{b: byBranch[b], err: err}) })
}

func (ws *workSession) send(r report) {
	select {
	case ws.reports <- r:
	case <-ws.quit:
	}
}

// submit sends what the reports carry in one request: each turn reported
// (EachTurn), and each finished branch's turns not sent yet with its score,
// or its failure. A refused request (409, 400) is sorted out branch by
// branch, so one lost lease does not cost the others their work: a refused
// branch is dropped (another lease will redo it), and turns the store
// refuses are reported as the branch's failure.
func (ws *workSession) submit(reports []report) error {
	w := ws.w
	var subs []rollout.Submission
	var ended []*held
	for _, r := range reports {
		h := r.b
		s := rollout.Submission{Lease: h.Lease.ID, Worker: w.Name, Node: h.Lease.Node, From: h.Lease.From + h.sent}
		switch {
		case r.turn != nil:
			s.Turns, s.EnvState, s.RewardPending = []model.Turn{*r.turn}, r.state, w.DeferRewards
			h.sent++
		case r.err != nil || h.Context.Err() != nil:
			// Stopped: the worker is ending, or the lease was lost.
			ended = append(ended, h)
			if ws.ctx.Err() == nil {
				ws.st.Lost++
			}
			continue
		case h.Err != nil:
			s.Error = h.Err.Error()
			ended = append(ended, h)
		default:
			s.Turns, s.Score = h.Turns[h.sent:], h.Score
			if len(s.Turns) > 0 {
				s.EnvState = h.Episode.State()
				s.RewardPending = w.DeferRewards
			}
			h.sent = len(h.Turns)
			ended = append(ended, h)
			if !h.Ended {
				ws.paths.put(h.Lease.Node, h.Path()) // it may come back: survive, or fork children
			}
			if len(s.Turns) == 0 && s.Score == nil {
				continue
			}
		}
		subs = append(subs, s)
	}
	defer func() {
		ws.mu.Lock()
		for _, h := range ended {
			h.cancel()
			delete(ws.held, h.Lease.ID)
		}
		ws.mu.Unlock()
	}()
	if len(subs) == 0 {
		return nil
	}
	err := ws.send1(subs)
	if err == nil || !(errors.Is(err, rollout.ErrConflict) || errors.Is(err, api.ErrBadRequest)) {
		return err
	}
	for _, s := range subs {
		err := ws.send1([]rollout.Submission{s})
		if errors.Is(err, api.ErrBadRequest) && len(s.Turns) > 0 {
			// The store refused what the policy or env produced: the
			// branch failed, like any other policy or env failure.
			err = ws.send1([]rollout.Submission{{Lease: s.Lease, Worker: s.Worker, Node: s.Node, Error: "turn: " + err.Error()}})
		}
		if errors.Is(err, rollout.ErrConflict) {
			ws.st.Lost++
			ws.drop(s.Lease)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// drop stops sampling a branch whose work the server refused.
func (ws *workSession) drop(lease string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if h := ws.held[lease]; h != nil {
		h.cancel()
	}
}

// send1 submits under one client key, retrying transport failures and 5xx
// with that key until the server answers: the retry of a submit that did
// commit gets the first answer back instead of writing again.
func (ws *workSession) send1(subs []rollout.Submission) error {
	w := ws.w
	req := api.SubmitRequest{Keyed: api.Keyed{ClientKey: NewKey()}, Submissions: subs}
	wait := ws.poll
	for {
		out, err := w.Client.Submit(ws.ctx, w.Run, req)
		if err == nil {
			ws.st.Submits++
			for _, s := range subs {
				ws.st.Turns += len(s.Turns)
			}
			if w.OnSubmit != nil {
				w.OnSubmit(req, out)
			}
			return nil
		}
		if !transient(ws.ctx, err) {
			return err
		}
		if !sleep(ws.ctx, wait) {
			return ws.ctx.Err()
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

// pathCache keeps the paths of the branches a worker grew last, so the
// server need not send them again with the branch's next interval or its
// children's first (LeaseRequest.Have). It holds up to limit paths and
// forgets the oldest first.
type pathCache struct {
	limit int
	paths map[uint64][]model.Turn
	order []uint64
}

func (c *pathCache) put(node uint64, path []model.Turn) {
	if c.paths == nil {
		c.paths = map[uint64][]model.Turn{}
	}
	if _, ok := c.paths[node]; !ok {
		c.order = append(c.order, node)
	}
	c.paths[node] = path
	for len(c.order) > c.limit {
		delete(c.paths, c.order[0])
		c.order = c.order[1:]
	}
}

// have lists the cached paths for a lease request.
func (c *pathCache) have() []api.HeldPath {
	out := make([]api.HeldPath, 0, len(c.order))
	for _, n := range c.order {
		out = append(out, api.HeldPath{Node: n, PathLen: len(c.paths[n])})
	}
	return out
}

// complete is a grant's whole history: what the worker holds of the path
// the grant names, then the turns it carries.
func (c *pathCache) complete(g api.LeaseGrant) []model.Turn {
	if g.HistoryOf == 0 {
		return g.History
	}
	held := c.paths[g.HistoryOf]
	return append(held[:g.HistoryFrom:g.HistoryFrom], g.History...)
}
