package store

import "github.com/patrdb/patrdb/model"

// Trajectory materialises the full path of a node: each ancestor's own
// turns up to the fork point its child inherits, then the node's own turns.
// Ancestors come from the node LRU; turns are decoded once each and never
// stored twice.
func (r *RunTx) Trajectory(id uint64) ([]model.PathTurn, error) {
	if r.checking() {
		return r.chk.Trajectory(id)
	}
	segs, err := r.pathSegments(id)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, s := range segs {
		total += s.count
	}
	out := make([]model.PathTurn, 0, total)
	for _, s := range segs {
		err := r.readTurns(s.node, s.count, func(i int, t model.Turn) {
			out = append(out, model.PathTurn{Turn: t, Node: s.node, Index: i})
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Path returns the segments of a node's trajectory, root first, without
// reading any turn.
func (r *RunTx) Path(id uint64) ([]model.Segment, error) {
	if r.checking() {
		return r.chk.Path(id)
	}
	segs, err := r.pathSegments(id)
	if err != nil {
		return nil, err
	}
	out := make([]model.Segment, len(segs))
	for i, s := range segs {
		out[i] = model.Segment{Node: s.node, Count: s.count}
	}
	return out, nil
}

type segment struct {
	node  uint64
	count int
}

func (r *RunTx) pathSegments(id uint64) ([]segment, error) {
	n, err := r.nodeRef(id)
	if err != nil {
		return nil, err
	}
	segs := []segment{{id, n.Turns}}
	depth := n.Depth
	for hops := 0; n.Parent != 0; hops++ {
		if hops >= depth || n.Parent >= n.ID {
			return nil, &CorruptError{Bucket: r.bpath(bNodes), Key: u64key(n.ID), Reason: "parent chain does not descend to a root"}
		}
		fork := n.Fork
		if n, err = r.nodeRef(n.Parent); err != nil {
			return nil, err
		}
		if fork > n.Turns {
			return nil, &CorruptError{Bucket: r.bpath(bNodes), Key: u64key(n.ID), Reason: "child forks past the parent's turns"}
		}
		segs = append(segs, segment{n.ID, fork})
	}
	for i, j := 0, len(segs)-1; i < j; i, j = i+1, j-1 {
		segs[i], segs[j] = segs[j], segs[i]
	}
	return segs, nil
}
