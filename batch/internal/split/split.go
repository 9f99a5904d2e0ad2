// Package split holds the size from which package batch splits a batch's
// writing across goroutines: a variable of its own so that the tests of
// batch and batchdb can lower it and cover the parallel path on small
// batches, without an exported knob in either package.
package split

// Min is the number of tokens below which one goroutine writes
// everything: starting more costs more than it saves.
var Min int64 = 1 << 18

// Lower sets Min to n until the returned func restores it.
func Lower(n int64) (restore func()) {
	old := Min
	Min = n
	return func() { Min = old }
}
