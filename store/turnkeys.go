package store

import "github.com/patrdb/patrdb/model"

// Where turns are stored. Format 3 keys a turn by the run's turn sequence
// number, then its node (seq|node): turns are numbered as they are
// appended, so the bucket grows at its end however many branches grow at
// once, and a node finds its own turns through its TurnRanges. Formats 1
// and 2 keyed them node|index (own-turn index), which scatters concurrent
// branches' appends across the b-tree; this build still reads those.

// turnSpan is a run of a node's turns under consecutive keys: sequence
// numbers first, first+1, ... (format 3) or own-turn indexes (older).
type turnSpan struct {
	first uint64
	count int
}

// legacyTurns reports whether the file keys turns node|index.
func (r *RunTx) legacyTurns() bool { return r.tx.db.format.Load() < 3 }

// turnSpans returns where n's own turns from, from+1, ..., from+count-1
// are stored, in order.
func (r *RunTx) turnSpans(n *model.Node, from, count int) ([]turnSpan, error) {
	if count <= 0 {
		return nil, nil
	}
	if r.legacyTurns() {
		return []turnSpan{{uint64(from), count}}, nil
	}
	var out []turnSpan
	skip := from
	for _, rg := range n.TurnRanges {
		if skip >= rg.Count {
			skip -= rg.Count
			continue
		}
		c := min(rg.Count-skip, count)
		out = append(out, turnSpan{rg.Seq + uint64(skip), c})
		if count -= c; count == 0 {
			return out, nil
		}
		skip = 0
	}
	return nil, &CorruptError{Bucket: r.bpath(bNodes), Key: u64key(n.ID), Reason: "turn ranges hold fewer turns than the record says"}
}

// spanKey is the key of the j-th turn of span s of node id.
func (r *RunTx) spanKey(id uint64, s turnSpan, j int) []byte {
	if r.legacyTurns() {
		return turnKey(id, int(s.first)+j)
	}
	return u64key2(s.first+uint64(j), id)
}

// isSpanKey reports whether k is spanKey(id, s, j), without building it.
func (r *RunTx) isSpanKey(k []byte, id uint64, s turnSpan, j int) bool {
	if len(k) != 16 {
		return false
	}
	if r.legacyTurns() {
		return keyU64(k, 0) == id && keyU64(k, 1) == s.first+uint64(j)
	}
	return keyU64(k, 0) == s.first+uint64(j) && keyU64(k, 1) == id
}
