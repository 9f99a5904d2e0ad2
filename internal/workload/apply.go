package workload

import (
	"fmt"

	"github.com/patrdb/patrdb/store"
)

// Apply makes the store call op stands for, and checks that the store
// hands out the ids the workload expects (a fresh run allocates them in
// creation order), so every contender stores the same tree.
func Apply(r *store.RunTx, op *Op) error {
	switch op.Kind {
	case OpOpenGroup:
		g, err := r.OpenGroup(store.GroupSpec{Step: op.Step, Task: op.Task, Prompt: op.Prompt})
		if err != nil {
			return err
		}
		if g.ID != op.Group {
			return fmt.Errorf("workload: store gave group id %d, workload expects %d", g.ID, op.Group)
		}
	case OpAddNode:
		n, err := r.AddNode(store.NodeSpec{Step: op.Step, Group: op.Group, Parent: op.Parent, Fork: op.Fork, Ordinal: op.Ordinal})
		if err != nil {
			return err
		}
		if n.ID != op.Node {
			return fmt.Errorf("workload: store gave node id %d, workload expects %d", n.ID, op.Node)
		}
	case OpTurns:
		return r.AppendTurns(op.Node, op.From, op.Turns...)
	case OpStatus:
		return r.SetNodeStatus(op.Node, op.Status)
	case OpReward:
		return r.SetReward(op.Node, op.Value)
	case OpScore:
		return r.Score(op.Node, op.Score)
	case OpRoute:
		return r.Route(op.Node, op.Decision)
	case OpInterval:
		return r.SetGroupInterval(op.Step, op.Group, op.Interval)
	case OpAdvantage:
		return r.PutAdvantage(op.Adv)
	case OpCloseGroup:
		return r.CloseGroup(op.Step, op.Group)
	default:
		return fmt.Errorf("workload: unknown op kind %d", op.Kind)
	}
	return nil
}

// ApplyTxn applies one transaction of a batch to a run in one db.Update.
func ApplyTxn(db *store.DB, run string, txn []Op) error {
	return db.UpdateRun(run, func(r *store.RunTx) error {
		for i := range txn {
			if err := Apply(r, &txn[i]); err != nil {
				return err
			}
		}
		return nil
	})
}
