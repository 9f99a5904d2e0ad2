package tree

import (
	"fmt"
	"github.com/patrdb/patrdb/model"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Coordinator is the PaTR rollout protocol of one run, and the only code
// that writes rollout records: it opens steps, hands branches to workers
// on leases, takes their turns and scores, routes each group when its
// interval is complete, and closes groups with their advantages. The
// in-process Engine and the HTTP server both drive it, so a tree grown by
// one Go trainer, by many goroutines or by worker processes over HTTP obeys
// the same rules and is recorded the same way.
//
// Every rule is checked against the store inside the caller's write
// transaction, so a refused request writes nothing; leases only say which
// worker is expected to do a branch's current interval. They live in the
// Coordinator's memory: after a restart every lease is lost, the workers'
// submits are refused with ErrLeaseLost, and they lease again from the
// last committed turn — committed work is never redone, uncommitted work
// is never half-written.
//
// A Coordinator is safe for concurrent use. Keep one per run per process:
// two Coordinators over the same run would each hand out the same branch.
type Coordinator struct {
	db   *store.DB
	run  string
	cfg  Config
	opts CoordinatorOptions

	mu     sync.Mutex
	leases map[uint64]*held // node → its current lease
	byID   map[string]*held // lease id → the same leases
	// granted is the newest snapshot a grant was judged on: a grant on an
	// older one could overwrite a current lease with one for a state the
	// branch has left.
	granted uint64
	// version is the newest run policy version this coordinator has read or
	// published: renewals judge OnPublishAbort by it without a read.
	version uint64
	// cursor is where the next grant of a few branches starts looking (the
	// node after the last one granted), idle the last round that found
	// nothing to grant.
	cursor uint64
	idle   idleRound
	// pending notes when each branch was first seen awaiting a deferred
	// reward or a remote score, for PendingTTL. It lives in memory: a
	// restarted coordinator starts the wait again from the first time it
	// sees the branch.
	pending map[uint64]time.Time
	// statusMemo is the last status read of each polled step (status.go).
	statusMemo statusMemo
	// leaseGen counts the changes to the lease table (grants, drops,
	// renewals), leased the last count Leased made (leased.go).
	leaseGen uint64
	leased   leasedMemo
}

// CoordinatorOptions tune a Coordinator. The zero value means the defaults.
type CoordinatorOptions struct {
	// LeaseTTL is how long a worker may hold a branch without a sign of
	// life — a renewal (heartbeat) or a submit — before it is handed to
	// another worker (default rollout.DefaultLeaseTTL, 30 s: workers renew
	// every rollout.HeartbeatEvery(TTL) while a slow tool runs, so a dead
	// worker's branches return within three heartbeats).
	LeaseTTL time.Duration
	// MaxAttempts is how many times a branch may fail (its policy, env or
	// scorer call) before it is recorded failed for good (default 3).
	MaxAttempts int
	// AllowConfigChange records the given config as the run's new one when
	// it differs from the recorded config, instead of refusing with
	// ErrConfigMismatch. The change is on record in the event log.
	AllowConfigChange bool
	// Now is the clock for lease expiry (default time.Now).
	Now func() time.Time
}

// Defaults and bounds of CoordinatorOptions and lease requests.
const (
	MaxLeaseTTL        = 24 * time.Hour // a worker silent for longer is dead
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 100
)

func (o *CoordinatorOptions) ensureDefaults() error {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = rollout.DefaultLeaseTTL
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.LeaseTTL < 0 || o.LeaseTTL > MaxLeaseTTL:
		return fmt.Errorf("%w: LeaseTTL %v, want up to %v", ErrInvalidConfig, o.LeaseTTL, MaxLeaseTTL)
	case o.MaxAttempts < 1 || o.MaxAttempts > MaxMaxAttempts:
		return fmt.Errorf("%w: MaxAttempts %d, want 1..%d", ErrInvalidConfig, o.MaxAttempts, MaxMaxAttempts)
	}
	return nil
}

// NewCoordinator returns the coordinator of run, which must exist. With a
// nil cfg it uses the run's recorded tree config (a run without one is
// ErrInvalid). With a cfg, a run without a recorded config records it; a
// run whose recorded config differs is refused with ErrConfigMismatch
// naming the fields, unless opts.AllowConfigChange.
func NewCoordinator(db *store.DB, run string, cfg *Config, opts *CoordinatorOptions) (*Coordinator, error) {
	var o CoordinatorOptions
	if opts != nil {
		o = *opts
	}
	if err := o.ensureDefaults(); err != nil {
		return nil, err
	}
	var info model.Run
	var recorded Config
	var has bool
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		if info, err = r.Info(); err != nil {
			return err
		}
		recorded, has, err = RecordedConfig(info)
		return err
	})
	if err != nil {
		return nil, err
	}
	var use Config
	switch {
	case cfg == nil && !has:
		return nil, fmt.Errorf("%w: run %q recorded no tree config; give one", model.ErrInvalid, run)
	case cfg == nil:
		use = recorded
	default:
		use = *cfg
	}
	if err := use.Validate(); err != nil {
		return nil, err
	}
	if cfg != nil && (!has || recorded != use) {
		if has && !o.AllowConfigChange {
			return nil, fmt.Errorf("%w: run %q: %s (resume with the recorded config, or allow the change explicitly)",
				rollout.ErrConfigMismatch, run, strings.Join(ConfigDiff(recorded, use), ", "))
		}
		if err := db.Update(func(tx *store.Tx) error {
			r, err := tx.Run(run)
			if err != nil {
				return err
			}
			cur, err := r.Info()
			if err != nil {
				return err
			}
			b, err := withTree(cur, use)
			if err != nil {
				return err
			}
			return r.SetConfig(b)
		}); err != nil {
			return nil, err
		}
	}
	return &Coordinator{db: db, run: run, cfg: use, opts: o, version: info.PolicyVersion,
		leases: map[uint64]*held{}, byID: map[string]*held{}, pending: map[uint64]time.Time{}}, nil
}

// Config is the tree config the coordinator routes with.
func (c *Coordinator) Config() Config { return c.cfg }

// Run is the id of the coordinator's run.
func (c *Coordinator) Run() string { return c.run }

// DB is the store the coordinator writes.
func (c *Coordinator) DB() *store.DB { return c.db }

func (c *Coordinator) runTx(tx *store.Tx) (*store.RunTx, error) { return tx.Run(c.run) }

// MaxRootsPerOpen caps the root branches one OpenStep call creates (its
// new tasks × B0): they are written in one transaction, which every other
// writer of the file waits for. A larger step opens in parts — OpenStep
// extends a step whose groups are a prefix of its tasks.
const MaxRootsPerOpen = 8192

// OpenStep opens one group per task at step, each with B0 root branches,
// in task order. Task ids are non-empty and unique within the step.
//
// Asking again is safe: the groups a step already holds must be for the
// first tasks asked for, field for field (id, prompt, prompt tokens, gold,
// meta), and come back as they are; the tasks past them open new groups,
// so a driver that wants more informative groups extends its step. Fewer
// tasks than the step's groups, or a task that differs from the group
// opened for it, is ErrStepExists naming the field; more new roots than
// MaxRootsPerOpen is model.ErrInvalid.
func (c *Coordinator) OpenStep(tx *store.Tx, step uint64, tasks []rollout.Task) ([]model.Group, error) {
	if step == 0 {
		return nil, fmt.Errorf("%w: step 0: steps start at 1", model.ErrInvalid)
	}
	seen := make(map[string]bool, len(tasks))
	for i, t := range tasks {
		switch {
		case t.ID == "":
			return nil, fmt.Errorf("%w: task %d has no id", model.ErrInvalid, i)
		case seen[t.ID]:
			return nil, fmt.Errorf("%w: task id %q appears twice in step %d", model.ErrInvalid, t.ID, step)
		}
		seen[t.ID] = true
	}
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	if step <= info.LastStep {
		return nil, fmt.Errorf("%w: step %d of run %q is already completed (last step %d)", rollout.ErrConflict, step, c.run, info.LastStep)
	}
	existing, err := r.Groups(step)
	if err != nil {
		return nil, err
	}
	if len(existing) > len(tasks) {
		return nil, fmt.Errorf("%w: step %d of run %q holds %d groups; asked for %d tasks", rollout.ErrStepExists, step, c.run, len(existing), len(tasks))
	}
	for i, g := range existing {
		if field := taskDiff(TaskOf(g), tasks[i]); field != "" {
			return nil, fmt.Errorf("%w: step %d of run %q opened group %d for task %q, which differs from task %d asked for in its %s",
				rollout.ErrStepExists, step, c.run, g.ID, g.Task, i, field)
		}
	}
	fresh := tasks[len(existing):]
	if roots := len(fresh) * c.cfg.B0; roots > MaxRootsPerOpen {
		return nil, fmt.Errorf("%w: %d tasks × B0 %d = %d root branches in one request; open at most %d at a time (OpenStep extends a step)",
			model.ErrInvalid, len(fresh), c.cfg.B0, roots, MaxRootsPerOpen)
	}
	out := append(make([]model.Group, 0, len(tasks)), existing...)
	for _, t := range fresh {
		g, err := r.OpenGroup(store.GroupSpec{Step: step, Task: t.ID, Prompt: t.Prompt, PromptTokens: t.PromptTokens, Gold: t.Gold, Meta: t.Meta})
		if err != nil {
			return nil, err
		}
		for i := range c.cfg.B0 {
			if _, err := r.AddNode(store.NodeSpec{Step: step, Group: g.ID, Ordinal: i}); err != nil {
				return nil, err
			}
		}
		if g, err = r.GroupAt(step, g.ID); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// taskDiff names the first field in which task b differs from a, or "".
func taskDiff(a, b rollout.Task) string {
	switch {
	case a.ID != b.ID:
		return "id"
	case a.Prompt != b.Prompt:
		return "prompt"
	case !slices.Equal(a.PromptTokens, b.PromptTokens):
		return "prompt tokens"
	case a.Gold != b.Gold:
		return "gold"
	case !maps.Equal(a.Meta, b.Meta):
		return "meta"
	}
	return ""
}

// OpenSteps returns the steps past the run's last completed one that still
// have open groups, in ascending order: the work a resume continues.
func (c *Coordinator) OpenSteps(tx *store.Tx) ([]uint64, error) {
	r, err := c.runTx(tx)
	if err != nil {
		return nil, err
	}
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	var steps []uint64
	err = r.ForEachGroupDesc(func(g model.Group) error {
		if g.Step <= info.LastStep {
			return errStopScan
		}
		if g.Status == model.GroupOpen && (len(steps) == 0 || steps[len(steps)-1] != g.Step) {
			steps = append(steps, g.Step)
		}
		return nil
	})
	if err == errStopScan {
		err = nil
	}
	for i, j := 0, len(steps)-1; i < j; i, j = i+1, j-1 {
		steps[i], steps[j] = steps[j], steps[i]
	}
	return steps, err
}
