package store

import (
	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store/internal/rawbolt"
)

// The bbolt handles reach tests and benchmarks only through storetest:
// writing through them bypasses every invariant of the store.
func init() {
	rawbolt.DB = func(db any) *bolt.DB { return db.(*DB).bolt }
	rawbolt.Tx = func(tx any) *bolt.Tx { return tx.(*Tx).btx }
	rawbolt.AppendEvent = func(r any, kind string, step, group, node, rubric uint64, payload any) (uint64, error) {
		return r.(*RunTx).appendAnyEvent(model.EventKind(kind), step, group, node, rubric, payload)
	}
}
