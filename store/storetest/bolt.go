package storetest

import (
	bolt "go.etcd.io/bbolt"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/store/internal/rawbolt"
)

// Bolt returns the bbolt handle under db, for tests and benchmarks that
// must look beneath the store. Writing through it bypasses every invariant.
func Bolt(db *store.DB) *bolt.DB { return rawbolt.DB(db) }

// BoltTx returns the bbolt transaction under tx (see Bolt).
func BoltTx(tx *store.Tx) *bolt.Tx { return rawbolt.Tx(tx) }
