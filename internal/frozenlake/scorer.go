package frozenlake

// RevisitPenalty is the most the progress score loses for a trajectory that
// did nothing but revisit cells; see [Map.ProgressScore].
const RevisitPenalty = 0.1

// manhattan is the grid distance between two cells.
func (m Map) manhattan(a, b int) int {
	dr := m.Row(a) - m.Row(b)
	dc := m.Col(a) - m.Col(b)
	return abs(dr) + abs(dc)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// maxManhattan is the largest distance from any cell to the goal: 2(N-1) when
// the goal is in a corner, as on both standard maps. Normalising by it maps
// the farthest cell to closeness 0.
func (m Map) maxManhattan() int {
	g := m.GoalPos()
	best := 0
	for p := 0; p < m.NumStates(); p++ {
		best = max(best, m.manhattan(p, g))
	}
	return best
}

// Closeness is 1 − manhattan(pos, goal)/maxManhattan: 1 on the goal, 0 on the
// cell farthest from it. It ignores holes; that is the scorer's job. An
// off-board position has closeness 0.
func (m Map) Closeness(pos int) float64 {
	if !m.InBounds(pos) {
		return 0
	}
	d := m.maxManhattan()
	if d == 0 {
		return 1
	}
	return 1 - float64(m.manhattan(pos, m.GoalPos()))/float64(d)
}

// revisits counts the entries of positions that repeat a cell already seen
// earlier in the list, a wall bump (same cell twice in a row) included.
func revisits(positions []int) (revisited, distinct int) {
	seen := make(map[int]struct{}, len(positions))
	for _, p := range positions {
		if _, ok := seen[p]; ok {
			revisited++
			continue
		}
		seen[p] = struct{}{}
	}
	return revisited, len(seen)
}

// ProgressScore is PaTR's process scorer on FrozenLake: a number in [0,1]
// that says how promising a partial trajectory is, so the router can expand
// the best branches and prune the hopeless ones. positions is the list of
// cells visited, starting with the start cell (a trajectory of k moves has
// k+1 positions).
//
//   - A trajectory that ended in a hole scores 0: it can never succeed, and
//     the router should never spend budget on it.
//   - One that reached the goal scores 1: nothing can be better.
//   - Otherwise the score is the closeness of the last cell to the goal
//     (see [Map.Closeness]) minus RevisitPenalty × the fraction of moves that
//     landed on an already-visited cell, clamped to [0,1]. The penalty is
//     small on purpose: at most 0.1 in all, less than one cell of progress
//     on the 4x4 map (1/6) and under two on the 8x8 (1/14 each), so it
//     breaks ties between branches about equally close to the goal in
//     favour of the one that did not wander or bump into walls, rather than
//     overriding real progress.
//
// The empty trajectory scores 0 (no evidence), as does one that ends off the
// board.
func (m Map) ProgressScore(positions []int) float64 {
	if len(positions) == 0 {
		return 0
	}
	last := positions[len(positions)-1]
	switch {
	case !m.InBounds(last), m.IsHole(last):
		return 0
	case m.IsGoal(last):
		return 1
	}
	s := m.Closeness(last)
	if moves := len(positions) - 1; moves > 0 {
		rev, _ := revisits(positions)
		s -= RevisitPenalty * float64(rev) / float64(moves)
	}
	return clamp01(s)
}

func clamp01(x float64) float64 {
	switch {
	case x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}
