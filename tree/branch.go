package tree

import (
	"hash/fnv"
	"math"
	"slices"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// The state of a branch is read off its records, never kept beside them:
// a coordinator that restarts, or a second one reading the file, sees
// exactly what the first one did.

// intervalStart is the path length at which n's current interval began:
// the turn of its last score from an earlier interval (it survived), its
// fork point if it is a child never scored since (children are created
// when their parent's interval is routed), or, for a root never scored,
// K turns per interval already committed (interval 0 starts at 0; under
// NoScoring every interval advances a live root by exactly K).
func intervalStart(n *model.Node, g *model.Group, k int) int {
	for i := len(n.Scores) - 1; i >= 0; i-- {
		if n.Scores[i].Interval < g.Interval {
			return n.Scores[i].Turn
		}
	}
	if n.Parent != 0 {
		return n.Base
	}
	return g.Interval * k
}

// scoredAt reports whether n holds a score for interval i.
func scoredAt(n *model.Node, i int) bool {
	for j := len(n.Scores) - 1; j >= 0; j-- {
		if n.Scores[j].Interval == i {
			return true
		}
	}
	return false
}

// scoreAt is n's score for interval i.
func scoreAt(n *model.Node, i int) float64 {
	for j := len(n.Scores) - 1; j >= 0; j-- {
		if n.Scores[j].Interval == i {
			return n.Scores[j].Value
		}
	}
	return math.NaN()
}

// branchPhase says what an active branch waits for in its group's current
// interval.
type branchPhase int

const (
	needTurns branchPhase = iota // fewer than K turns into the interval
	needScore                    // K turns in, no score yet
	routable                     // scored (or, under NoScoring, K turns in): waits for its group
)

func (c *Coordinator) phase(n *model.Node, g *model.Group) branchPhase {
	start := intervalStart(n, g, c.cfg.K)
	switch {
	case n.PathLen() < start+c.cfg.K:
		return needTurns
	case c.cfg.NoScoring || scoredAt(n, g.Interval):
		return routable
	}
	return needScore
}

// branchKey hashes a group id and the ordinals from the root down to a
// node: the node's place in its tree, independent of the id it was given.
func branchKey(group uint64, ordinals []int) uint64 {
	h := fnv.New64a()
	var b [8]byte
	put := func(x uint64) {
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
		h.Write(b[:])
	}
	put(group)
	for _, o := range ordinals {
		put(uint64(o))
	}
	return h.Sum64()
}

// branchKeyOf walks n's ancestors (from the node cache) for its ordinals.
func branchKeyOf(r *store.RunTx, n model.Node) (uint64, error) {
	ords := []int{n.Ordinal}
	for p := n.Parent; p != 0; {
		pn, err := r.Node(p)
		if err != nil {
			return 0, err
		}
		ords = append(ords, pn.Ordinal)
		p = pn.Parent
	}
	for i, j := 0, len(ords)-1; i < j; i, j = i+1, j-1 {
		ords[i], ords[j] = ords[j], ords[i]
	}
	return branchKey(n.Group, ords), nil
}

// repeatRunOf counts identical actions at the end of n's path, looking no
// further back than limit turns: routing only asks whether the run reached
// RepeatPrune.
func repeatRunOf(r *store.RunTx, n model.Node, limit int) (int, error) {
	if limit <= 0 || n.PathLen() == 0 {
		return 0, nil
	}
	var last string
	count := 0
	err := r.PathBackward(n.ID, func(t store.TurnBrief) bool {
		if count > 0 && t.Action != last {
			return false
		}
		last = t.Action
		count++
		return count < limit
	})
	return count, err
}

// pathReward is PathReward of n's path.
func pathReward(r *store.RunTx, id uint64) (float64, error) {
	var rewards []float64
	err := r.PathBackward(id, func(t store.TurnBrief) bool { rewards = append(rewards, t.Reward); return true })
	slices.Reverse(rewards)
	return PathReward(rewards), err
}

// PathReward is the outcome reward of a leaf whose writer gave none — a
// pruned branch, or one that ended or hit the turn cap without a reward
// of its own: the sum of the env rewards along its path, given root first
// and added in that order, as a trainer adds them while sampling.
func PathReward(rewards []float64) float64 {
	var sum float64
	for _, r := range rewards {
		sum += r
	}
	return sum
}
