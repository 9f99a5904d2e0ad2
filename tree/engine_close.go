package tree

import (
	"context"
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// closeGroups closes each finished group in its own transaction: rubric
// shaping (if any) is prepared outside it, then the shaping's writes, the
// advantages and the close commit together, with an EvGroupFilter event
// when filter is set (dynamic sampling) and the group carries no gradient.
func (e *Engine) closeGroups(ctx context.Context, step uint64, groups []uint64, res *StepResult, filter bool) error {
	for _, id := range groups {
		var g model.Group
		var leaves []Leaf
		if err := e.db.View(func(tx *store.Tx) (err error) {
			g, leaves, err = e.coord.Leaves(tx, step, id, e.opts.Shaper != nil)
			return err
		}); err != nil {
			return err
		}
		if g.Status != model.GroupOpen {
			continue
		}
		var shaping *Shaping
		if e.opts.Shaper != nil && len(leaves) > 0 {
			var err error
			if shaping, err = e.opts.Shaper.Prepare(ctx, step, g, leaves); err != nil {
				return fmt.Errorf("tree: shaping group %d: %w", g.ID, err)
			}
		}
		var gr GroupResult
		if err := e.db.Update(func(tx *store.Tx) (err error) {
			if gr, err = e.coord.Close(tx, step, id, shaping, e.opts.Eps); err != nil || !filter {
				return err
			}
			if len(gr.Advantages) == 0 || gr.Advantages[0].ZeroVariance {
				r, err := tx.Run(e.run)
				if err != nil {
					return err
				}
				_, err = r.AppendEvent(EvGroupFilter, step, id, 0, 0, map[string]string{"reason": "zero outcome variance"})
				return err
			}
			return nil
		}); err != nil {
			return err
		}
		res.Groups = append(res.Groups, gr)
	}
	return nil
}
