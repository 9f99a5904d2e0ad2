package batchdb

// SetParallelMin lowers the size at which writing goes parallel, so tests
// cover the parallel path on small batches; the returned func restores it.
func SetParallelMin(n int64) (restore func()) {
	old := parallelMin
	parallelMin = n
	return func() { parallelMin = old }
}
