package tree

import (
	"context"
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// closeGroups closes each finished group in its own transaction: rubric
// shaping (if any) is prepared outside it, then the shaping's writes, the
// advantages and the close commit together; with filter set (dynamic
// sampling) through CloseSampled.
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
		close := e.coord.Close
		if filter {
			close = e.coord.CloseSampled
		}
		if err := e.db.Update(func(tx *store.Tx) (err error) {
			gr, err = close(tx, step, id, shaping, e.opts.Eps)
			return err
		}); err != nil {
			return err
		}
		res.Groups = append(res.Groups, gr)
	}
	return nil
}
