package storetest

import (
	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/internal/rawbolt"
)

// Bolt returns the bbolt handle under db, for tests and benchmarks that
// must look beneath the store. Writing through it bypasses every invariant.
func Bolt(db *store.DB) *bolt.DB { return rawbolt.DB(db) }

// BoltTx returns the bbolt transaction under tx (see Bolt).
func BoltTx(tx *store.Tx) *bolt.Tx { return rawbolt.Tx(tx) }

// AppendRawEvent is RunTx.AppendEvent without its refusal of the store's
// own kinds, for a test that needs a log the store would not write (an
// event of a store kind whose payload is not its record).
func AppendRawEvent(r *store.RunTx, kind model.EventKind, step, group, node, rubric uint64, payload any) (uint64, error) {
	return rawbolt.AppendEvent(r, string(kind), step, group, node, rubric, payload)
}
