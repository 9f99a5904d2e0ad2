package batchmeasure

import (
	"fmt"
	"slices"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

type handRows struct {
	ids, pos []int32
	mask     []uint8
	lp, adv  []float32
}

// byHand is what a Go trainer wrote before package batch: each leaf's
// Trajectory, its tokens appended to growing arrays.
func byHand(db *store.DB) (*handRows, error) {
	h := &handRows{}
	err := db.ViewRun(Run, func(r *store.RunTx) error {
		groups, err := r.Groups(1)
		if err != nil {
			return err
		}
		for _, g := range groups {
			advs, err := r.Advantages(1, g.ID)
			if err != nil {
				return err
			}
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			slices.SortFunc(nodes, func(a, b model.Node) int { return int(a.ID) - int(b.ID) })
			for _, n := range nodes {
				if !n.Status.Leaf() {
					continue
				}
				adv := float32(0)
				for _, a := range advs {
					if a.Leaf == n.ID {
						adv = float32(a.Advantage)
					}
				}
				traj, err := r.Trajectory(n.ID)
				if err != nil {
					return err
				}
				start := len(h.ids)
				for _, id := range g.PromptTokens {
					h.ids, h.mask, h.lp, h.adv = append(h.ids, int32(id)), append(h.mask, 0), append(h.lp, 0), append(h.adv, 0)
				}
				for _, t := range traj {
					for i, id := range t.ActionTokens {
						h.ids, h.mask, h.adv = append(h.ids, int32(id)), append(h.mask, 1), append(h.adv, adv)
						if len(t.ActionLogprobs) > 0 {
							h.lp = append(h.lp, t.ActionLogprobs[i])
						} else {
							h.lp = append(h.lp, 0)
						}
					}
					for _, id := range t.ObservationTokens {
						h.ids, h.mask, h.lp, h.adv = append(h.ids, int32(id)), append(h.mask, 0), append(h.lp, 0), append(h.adv, 0)
					}
				}
				for i := range len(h.ids) - start {
					h.pos = append(h.pos, int32(i))
				}
			}
		}
		return nil
	})
	return h, err
}

// checkByHand makes sure both Go paths build the same token sequence, so
// the figures compare the same work.
func checkByHand(db *store.DB, rows *batch.Batch) error {
	h, err := byHand(db)
	if err != nil {
		return err
	}
	if !slices.Equal(h.ids, rows.InputIDs) || !slices.Equal(h.pos, rows.Positions) {
		return fmt.Errorf("the by-hand rows (%d tokens) differ from the batch's (%d)", len(h.ids), len(rows.InputIDs))
	}
	return nil
}
