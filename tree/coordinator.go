package tree

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

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

	mu       sync.Mutex
	instance string // lease id prefix: ids of an earlier instance never match
	seq      uint64
	leases   map[uint64]*held // node → its current lease
	// granted is the newest snapshot a grant was judged on: a grant on an
	// older one could overwrite a current lease with one for a state the
	// branch has left.
	granted uint64
}

// CoordinatorOptions tune a Coordinator. The zero value means the defaults.
type CoordinatorOptions struct {
	// LeaseTTL is how long a worker may hold a branch before it can be
	// handed to another worker (default 10 minutes: a slow interval of an
	// agent with long tool calls, not a crashed worker's whole backlog).
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

// Defaults of CoordinatorOptions.
const (
	DefaultLeaseTTL    = 10 * time.Minute
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 100
)

func (o *CoordinatorOptions) ensureDefaults() error {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.LeaseTTL < 0:
		return fmt.Errorf("%w: LeaseTTL %v is negative", ErrInvalidConfig, o.LeaseTTL)
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
	var info store.Run
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
		return nil, fmt.Errorf("%w: run %q recorded no tree config; give one", store.ErrInvalid, run)
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
				ErrConfigMismatch, run, strings.Join(ConfigDiff(recorded, use), ", "))
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
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	return &Coordinator{db: db, run: run, cfg: use, opts: o, instance: hex.EncodeToString(nonce[:]),
		leases: map[uint64]*held{}}, nil
}

// Config is the tree config the coordinator routes with.
func (c *Coordinator) Config() Config { return c.cfg }

// Run is the id of the coordinator's run.
func (c *Coordinator) Run() string { return c.run }

// DB is the store the coordinator writes.
func (c *Coordinator) DB() *store.DB { return c.db }

func (c *Coordinator) runTx(tx *store.Tx) (*store.RunTx, error) { return tx.Run(c.run) }

// OpenStep opens one group per task at step, each with B0 root branches,
// in task order. Asking again for the same tasks returns the groups already
// open (a restarted driver, a second worker); a step that holds groups for
// other tasks is ErrStepExists.
func (c *Coordinator) OpenStep(tx *store.Tx, step uint64, tasks []Task) ([]store.Group, error) {
	if step == 0 {
		return nil, fmt.Errorf("%w: step 0: steps start at 1", store.ErrInvalid)
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
		return nil, fmt.Errorf("%w: step %d of run %q is already completed (last step %d)", ErrConflict, step, c.run, info.LastStep)
	}
	existing, err := r.Groups(step)
	if err != nil {
		return nil, err
	}
	if len(existing) > 0 {
		same := len(existing) == len(tasks)
		for i := 0; same && i < len(tasks); i++ {
			same = existing[i].Task == tasks[i].ID && existing[i].Prompt == tasks[i].Prompt
		}
		if !same {
			return nil, fmt.Errorf("%w: step %d of run %q holds %d groups for other tasks", ErrStepExists, step, c.run, len(existing))
		}
		return existing, nil
	}
	out := make([]store.Group, 0, len(tasks))
	for _, t := range tasks {
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
	err = r.ForEachGroupDesc(func(g store.Group) error {
		if g.Step <= info.LastStep {
			return errStopScan
		}
		if g.Status == store.GroupOpen && (len(steps) == 0 || steps[len(steps)-1] != g.Step) {
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
