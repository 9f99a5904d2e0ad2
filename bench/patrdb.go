package main

import (
	"fmt"

	"github.com/patrdb/patrdb/bench/workload"
	"github.com/patrdb/patrdb/store"
)

// benchRun is the run id every benchmark store uses.
const benchRun = "bench"

// patrdbC is patrdb through its public API: validation, node records,
// frontier and child indexes and the event log included.
type patrdbC struct {
	db   *store.DB
	path string
	opts *store.Options // nil: store.DefaultOptions (fsync on)

	// encodeAhead: turns go through store.EncodeTurns in prepare, outside
	// the timed transaction, and RunTx.AppendEncodedTurns inside it — a
	// trainer that encodes each rollout's turns as they arrive, as the raw
	// bbolt anchor's values are encoded before its clock starts.
	encodeAhead bool
}

// encodedTxn is a transaction whose turns are encoded: enc[i] holds op i's
// turns when op i appends turns.
type encodedTxn struct {
	ops []workload.Op
	enc []store.EncodedTurns
}

func (p *patrdbC) name() string {
	if p.encodeAhead {
		return cPatrdbEnc
	}
	return cPatrdb
}

func (p *patrdbC) files() []string { return []string{p.path} }

func (p *patrdbC) open(path string) error {
	if err := removeStore(path); err != nil {
		return err
	}
	db, err := store.Open(path, p.opts)
	if err != nil {
		return err
	}
	p.db, p.path = db, path
	return db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(benchRun, []byte(`{"workload":"bench"}`), nil)
		return err
	})
}

func (p *patrdbC) prepare(txn []workload.Op) (any, error) {
	out := encodedTxn{ops: txn}
	if !p.encodeAhead {
		return out, nil
	}
	out.enc = make([]store.EncodedTurns, len(txn))
	for i := range txn {
		if txn[i].Kind == workload.OpTurns {
			enc, err := store.EncodeTurns(txn[i].Turns...)
			if err != nil {
				return nil, err
			}
			out.enc[i] = enc
		}
	}
	return out, nil
}

func (p *patrdbC) apply(prepared any) error {
	txn := prepared.(encodedTxn)
	return p.db.Update(func(tx *store.Tx) error {
		r, err := tx.Run(benchRun)
		if err != nil {
			return err
		}
		for i := range txn.ops {
			op := &txn.ops[i]
			if txn.enc != nil && op.Kind == workload.OpTurns {
				err = r.AppendEncodedTurns(op.Node, op.From, txn.enc[i])
			} else {
				err = applyOp(r, op)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *patrdbC) close() error {
	if p.db == nil {
		return nil
	}
	err := p.db.Close()
	p.db = nil
	return err
}

// applyOp makes the store call op stands for, and checks that the store
// hands out the ids the workload expects (a fresh run allocates them in
// creation order), so every contender stores the same tree.
func applyOp(r *store.RunTx, op *workload.Op) error {
	switch op.Kind {
	case workload.OpOpenGroup:
		g, err := r.OpenGroup(store.GroupSpec{Step: op.Step, Task: op.Task, Prompt: op.Prompt})
		if err != nil {
			return err
		}
		if g.ID != op.Group {
			return fmt.Errorf("bench: store gave group id %d, workload expects %d", g.ID, op.Group)
		}
	case workload.OpAddNode:
		n, err := r.AddNode(store.NodeSpec{Step: op.Step, Group: op.Group, Parent: op.Parent, Fork: op.Fork, Ordinal: op.Ordinal})
		if err != nil {
			return err
		}
		if n.ID != op.Node {
			return fmt.Errorf("bench: store gave node id %d, workload expects %d", n.ID, op.Node)
		}
	case workload.OpTurns:
		return r.AppendTurns(op.Node, op.From, op.Turns...)
	case workload.OpStatus:
		return r.SetNodeStatus(op.Node, op.Status)
	case workload.OpReward:
		return r.SetReward(op.Node, op.Value)
	case workload.OpScore:
		return r.Score(op.Node, op.Score)
	case workload.OpRoute:
		return r.Route(op.Node, op.Decision)
	case workload.OpInterval:
		return r.SetGroupInterval(op.Step, op.Group, op.Interval)
	case workload.OpAdvantage:
		return r.PutAdvantage(op.Adv)
	case workload.OpCloseGroup:
		return r.CloseGroup(op.Step, op.Group)
	default:
		return fmt.Errorf("bench: unknown op kind %d", op.Kind)
	}
	return nil
}
