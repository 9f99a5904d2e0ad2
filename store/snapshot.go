package store

// Snapshot is the id of the last committed write transaction whose state
// tx reads. Ids only grow, so of two transactions the one with the larger
// Snapshot sees everything the other sees. A caller that keeps state beside
// the file (tree's lease table, say) uses it to refuse judging that state
// on an older snapshot than one it already acted on.
func (tx *Tx) Snapshot() uint64 { return tx.snapshot }
