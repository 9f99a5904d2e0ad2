// Package batchdb reads a step's training batch (package batch) straight
// from the store, in one read transaction: Read and ReadInto inside the
// caller's transaction (a *store.RunTx), ReadDB opening its own. In a
// transaction in checked mode (store.Tx.CheckReads), for a file the
// process did not write, the batch checks exactly the pages and records it
// reads: damage on its way is a *store.CorruptError, damage elsewhere in
// the run does not stop it.
//
// What it reads is a batch.Source (ReadSource); batch.Assemble computes
// every figure the batch carries — rows, segments, credit, coefficients —
// from it, the same code whether the source came from this package or
// over the wire (package batch/sourcewire): a batch read here, one built
// by a client and one decoded from its file are equal. Every value must fit its
// tensor: a token id of 2^31 or more, a row longer than int32 positions or
// a policy version beyond int64 refuses the batch with batch.ErrOutOfRange.
package batchdb
