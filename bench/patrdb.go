package main

import (
	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/storetest"
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

func (p *patrdbC) boltDB() *bolt.DB {
	if p.db == nil {
		return nil
	}
	return storetest.Bolt(p.db)
}

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
	return p.applyIn(prepared, func() error { return nil })
}

// applyIn is apply, ending the transaction with end's error (nil
// commits).
func (p *patrdbC) applyIn(prepared any, end func() error) error {
	txn := prepared.(encodedTxn)
	return p.db.UpdateRun(benchRun, func(r *store.RunTx) error {
		var err error
		for i := range txn.ops {
			op := &txn.ops[i]
			if txn.enc != nil && op.Kind == workload.OpTurns {
				err = r.AppendEncodedTurns(op.Node, op.From, txn.enc[i])
			} else {
				err = workload.Apply(r, op)
			}
			if err != nil {
				return err
			}
		}
		return end()
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
