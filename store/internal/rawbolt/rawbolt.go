// Package rawbolt hands the bbolt handles under a store.DB or store.Tx to
// package storetest, for tests and benchmarks that must look beneath the
// store (damage a page, diff two files byte for byte, count free pages,
// write an event the store refuses), without making them part of store's
// API. Package store sets the hooks
// when it is initialised.
package rawbolt

import bolt "go.etcd.io/bbolt"

var (
	// DB returns the *bolt.DB under a *store.DB.
	DB func(db any) *bolt.DB
	// Tx returns the *bolt.Tx under a *store.Tx.
	Tx func(tx any) *bolt.Tx
	// AppendEvent is store.RunTx.AppendEvent (r a *store.RunTx) without
	// its rule against the store's own kinds.
	AppendEvent func(r any, kind string, step, group, node, rubric uint64, payload any) (uint64, error)
)
