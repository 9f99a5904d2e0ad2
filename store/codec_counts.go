package store

// The counters record (counts.go): an 8-element msgpack array — groups,
// open groups, zero-variance groups, nodes by status (an array in
// statusOrder), turns, materialised, rewarded, reward sum — the bytes
// msgpack/v5 writes for counts. Every write transaction writes two, the
// run's totals and its step's, and the reflective encoder was about a
// quarter of the flush's work besides its puts (perf of a tiny step commit).
const (
	countsFields = 8
	countsMax    = 1 + 3*9 + 1 + nStatuses*9 + 3*9 + 9 // every integer at its widest
)

// countsValue frames c's record into the transaction's chunks.
func (tx *Tx) countsValue(c *counts) []byte {
	return tx.value(countsMax, func(b []byte) []byte { return appendCountsMsgp(b, c) })
}

func appendCountsMsgp(b []byte, c *counts) []byte {
	b = appendArrayLen(b, countsFields)
	b = appendInt(b, c.Groups)
	b = appendInt(b, c.OpenGroups)
	b = appendInt(b, c.ZeroVariance)
	b = appendArrayLen(b, nStatuses)
	for _, x := range c.ByStatus {
		b = appendInt(b, x)
	}
	b = appendInt(b, c.Turns)
	b = appendInt(b, c.Materialised)
	b = appendInt(b, c.Rewarded)
	return appendFloat64(b, c.RewardSum)
}
