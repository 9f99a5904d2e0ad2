package tree

import (
	"context"
	"fmt"
	"github.com/patrdb/patrdb/model"

	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
)

// Dynamic sampling (DAPO's): a group whose leaves all got the same outcome
// reward has zero advantages — no gradient — so a step that wants N
// informative groups opens further tasks until N groups closed with
// non-zero outcome variance (before any rubric shaping). The groups left
// out are recorded as such: an EvGroupFilter event each.

// EvGroupFilter records that a group of a dynamically sampled step closed
// with zero outcome variance and does not count towards its informative
// groups; a trainer's batch may leave it out.
const EvGroupFilter model.EventKind = "group.filter"

// Sampling asks RolloutInformative for informative groups.
type Sampling struct {
	// Want is how many groups must close with non-zero outcome variance.
	Want int
	// More returns up to n further tasks; fewer (or none) when it has no
	// more to give. It must give the same tasks again when a crashed step
	// is driven again (a dataset iterator keyed by step, say).
	More func(n int) ([]rollout.Task, error)
	// MaxTasks caps the tasks the step opens in all (0: 8 × Want).
	MaxTasks int
}

// Informative splits the closed groups of step into those whose outcome
// rewards vary (they carry a gradient) and those that do not (every leaf
// the same reward, or no leaf at all). A rule of the library, so every
// driver — this engine, the Python StepDriver, a trainer's own — counts
// the same groups.
func (c *Coordinator) Informative(tx *store.Tx, step uint64) (informative, filtered []uint64, err error) {
	r, err := c.runTx(tx)
	if err != nil {
		return nil, nil, err
	}
	groups, err := r.Groups(step)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range groups {
		if g.Status != model.GroupClosed {
			continue
		}
		advs, err := r.Advantages(step, g.ID)
		if err != nil {
			return nil, nil, err
		}
		if len(advs) == 0 || advs[0].ZeroVariance {
			filtered = append(filtered, g.ID)
		} else {
			informative = append(informative, g.ID)
		}
	}
	return informative, filtered, nil
}

// RolloutInformative is Rollout with dynamic sampling: it opens tasks, then
// further tasks from s.More whenever the groups that closed informative
// plus those still open fall short of s.Want, until s.Want groups closed
// informative, s.More has no more, or s.MaxTasks are open. Each group that
// closes with zero outcome variance gets an EvGroupFilter event. The
// result's Informative and Filtered name the step's groups of each kind.
// Called again for a step a crash interrupted, with the same tasks, it
// continues where the step stood.
func (e *Engine) RolloutInformative(ctx context.Context, step uint64, tasks []rollout.Task, s Sampling) (*StepResult, error) {
	if s.Want < 1 || s.More == nil || s.MaxTasks < 0 {
		return nil, fmt.Errorf("%w: dynamic sampling wants Want >= 1, a More function and MaxTasks >= 0", ErrInvalidConfig)
	}
	if s.MaxTasks == 0 {
		s.MaxTasks = 8 * s.Want
	}
	if step == 0 {
		return nil, fmt.Errorf("%w: step 0: steps start at 1", model.ErrInvalid)
	}
	var opened []rollout.Task
	if err := e.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(e.run)
		if err != nil {
			return err
		}
		existing, err := r.Groups(step)
		if err != nil {
			return err
		}
		all := tasks
		if len(existing) > len(tasks) {
			// Extended before a crash: the step's own tasks, which must
			// start with the ones asked for (OpenStep checks).
			all = make([]rollout.Task, len(existing))
			for i, g := range existing {
				all[i] = TaskOf(g)
			}
			if _, err := e.coord.OpenStep(tx, step, all); err != nil {
				return err
			}
			for i := range tasks {
				if field := taskDiff(all[i], tasks[i]); field != "" {
					return fmt.Errorf("%w: step %d's task %d differs in its %s", rollout.ErrStepExists, step, i, field)
				}
			}
		}
		gs, err := e.coord.OpenStep(tx, step, all)
		for _, g := range gs {
			opened = append(opened, TaskOf(g))
		}
		return err
	}); err != nil {
		return nil, err
	}
	if e.opts.Shaper != nil {
		if err := e.opts.Shaper.BeginStep(ctx, step); err != nil {
			return nil, err
		}
	}
	d, err := e.newDriver(ctx, step)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	d.sampling, d.opened = &s, opened
	res, err := d.run()
	if err != nil {
		return nil, err
	}
	err = e.db.View(func(tx *store.Tx) (err error) {
		res.Informative, res.Filtered, err = e.coord.Informative(tx, step)
		return err
	})
	return res, err
}

// topUp opens further tasks of a dynamically sampled step while the groups
// closed informative and those still open fall short of what it wants. It
// reports whether it opened any.
func (d *driver) topUp() (bool, error) {
	s := d.sampling
	if s == nil {
		return false, nil
	}
	e := d.e
	var informative, open int
	if err := e.db.View(func(tx *store.Tx) error {
		inf, filt, err := e.coord.Informative(tx, d.step)
		informative, open = len(inf), len(d.opened)-len(inf)-len(filt)
		return err
	}); err != nil {
		return false, err
	}
	short := s.Want - informative - open
	room := s.MaxTasks - len(d.opened)
	if short <= 0 || room <= 0 || d.exhausted {
		return false, nil
	}
	more, err := s.More(min(short, room))
	if err != nil {
		return false, fmt.Errorf("tree: dynamic sampling: more tasks: %w", err)
	}
	if len(more) < min(short, room) {
		d.exhausted = true
	}
	if len(more) == 0 {
		return false, nil
	}
	all := append(append([]rollout.Task(nil), d.opened...), more[:min(len(more), room)]...)
	if err := e.db.Update(func(tx *store.Tx) error {
		_, err := e.coord.OpenStep(tx, d.step, all)
		return err
	}); err != nil {
		return false, err
	}
	d.opened = all
	return true, nil
}
