package batchdb

import (
	"github.com/patrdb/patrdb/batch"
	"slices"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// Check reads through cr what ReadInto reads of the step: its groups (or
// the chosen ones), their advantage records, and every node of each group
// with its children-index entries and its turns, so that damage on the
// batch's way is a *store.CorruptError before a row is built, while damage
// elsewhere in the run does not stop it. A reader of a file nobody has
// checked calls it before ReadInto (patrdb batch does); a reader that
// checked the whole run (store.CheckedRun.Sound, as the server does once
// per run) need not. It returns what ReadInto would for a step without
// groups or a chosen group not in the step.
func Check(cr *store.CheckedRun, step uint64, opts batch.Options) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	var groups []model.Group
	if opts.Groups == nil {
		all, err := cr.Groups(step)
		if err != nil {
			return err
		}
		groups = all
		if _, err := cr.Advantages(step, 0); err != nil {
			return err
		}
	} else {
		ids := slices.Clone(opts.Groups)
		slices.Sort(ids)
		for _, id := range slices.Compact(ids) {
			g, err := cr.GroupAt(step, id)
			if err != nil {
				return err
			}
			if _, err := cr.Advantages(step, id); err != nil {
				return err
			}
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		if _, err := cr.GroupNodes(g); err != nil {
			return err
		}
	}
	return nil
}
