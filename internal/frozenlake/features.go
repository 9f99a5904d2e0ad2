package frozenlake

import "fmt"

// Features summarise one (partial) trajectory in terms a rubric can talk
// about: "reaches the goal", "does not walk into walls", "does not go in
// circles", "takes no detours". The rubric judge on FrozenLake compares two
// trajectories through these numbers instead of raw position lists, so the
// same rubric text can be judged the same way on every map.
type Features struct {
	// Steps is the number of moves observed: len(positions) − 1.
	Steps int
	// Progress is the closeness of the final cell to the goal (see
	// [Map.Closeness]); it does not zero holes — FellInHole says that.
	Progress float64
	// Score is [Map.ProgressScore] of the same positions, so a judge can use
	// the scorer's view without recomputing it.
	Score float64
	// Distinct is the number of different cells visited, the start included.
	Distinct int
	// Revisits counts moves that landed on a cell visited before (wall
	// bumps included, since they "revisit" the current cell).
	Revisits int
	// WallBumps counts moves after which the position did not change: the
	// agent (or, on ice, the slip) pushed into the edge of the board.
	WallBumps int
	// WallAimed counts actions whose intended direction points off the board
	// from the cell where they were taken. On ice it differs from WallBumps:
	// it measures the policy's intent rather than the outcome.
	WallAimed int
	// MaxRepeat is the longest run of the same action in a row, the quantity
	// PaTR's repeat-prune rule (RepeatPrune) looks at.
	MaxRepeat int
	// ShortestPath is the BFS length of the shortest route from the first to
	// the final cell over non-hole cells, or −1 if there is none.
	ShortestPath int
	// StepsWasted is Steps − ShortestPath (never negative): moves that a
	// perfect walker would not have needed to end up in the same place.
	StepsWasted int
	// ReachedGoal and FellInHole say how the trajectory ended, if it did.
	ReachedGoal bool
	FellInHole  bool
}

// String renders the features as one line of key=value pairs, the form a
// text judge is shown.
func (f Features) String() string {
	return fmt.Sprintf("steps=%d progress=%.3f score=%.3f distinct=%d revisits=%d wall_bumps=%d wall_aimed=%d max_repeat=%d shortest=%d wasted=%d goal=%t hole=%t",
		f.Steps, f.Progress, f.Score, f.Distinct, f.Revisits, f.WallBumps, f.WallAimed, f.MaxRepeat, f.ShortestPath, f.StepsWasted, f.ReachedGoal, f.FellInHole)
}

// Features computes the trajectory's features. positions is the list of
// cells visited starting with the start cell; actions[i] is the action taken
// at positions[i]. The two usually differ in length by one, but neither is
// trusted to: position-based counts use positions, action-based counts use
// actions (WallAimed only over actions that have a matching position), and
// off-board positions or invalid actions are simply not counted, because the
// inputs come from a store or a judge prompt and a bad record must not crash
// the trainer.
func (m Map) Features(positions []int, actions []Action) Features {
	f := Features{ShortestPath: -1}
	if len(positions) == 0 {
		f.MaxRepeat = maxRepeat(actions)
		return f
	}
	f.Steps = len(positions) - 1
	last := positions[len(positions)-1]
	f.Progress = m.Closeness(last)
	f.Score = m.ProgressScore(positions)
	f.Revisits, f.Distinct = revisits(positions)
	for i := 1; i < len(positions); i++ {
		if positions[i] == positions[i-1] {
			f.WallBumps++
		}
	}
	for i, a := range actions {
		if i < len(positions) && a.Valid() && m.InBounds(positions[i]) && m.Move(positions[i], a) == positions[i] {
			f.WallAimed++
		}
	}
	f.MaxRepeat = maxRepeat(actions)
	f.ShortestPath = m.ShortestPath(positions[0], last)
	if f.ShortestPath >= 0 {
		f.StepsWasted = max(f.Steps-f.ShortestPath, 0)
	}
	f.ReachedGoal = m.IsGoal(last)
	f.FellInHole = m.IsHole(last)
	return f
}

func maxRepeat(actions []Action) int {
	best, run := 0, 0
	for i, a := range actions {
		if i > 0 && a == actions[i-1] {
			run++
		} else {
			run = 1
		}
		best = max(best, run)
	}
	return best
}

// ShortestPath is the number of moves on the shortest route from one cell to
// another, walking only through non-terminal cells (an episode ends on
// entering H or G, so neither can be crossed) though the destination itself
// may be a hole or the goal. It returns 0 when from == to and −1 when to is
// unreachable or either cell is off the board. Slips are ignored: this is
// the route a perfect walker on dry ground would take.
func (m Map) ShortestPath(from, to int) int {
	if !m.InBounds(from) || !m.InBounds(to) {
		return -1
	}
	if from == to {
		return 0
	}
	dist := make([]int, m.NumStates())
	for i := range dist {
		dist[i] = -1
	}
	dist[from] = 0
	queue := []int{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != from && m.IsTerminal(p) {
			continue // cannot walk on from a hole or the goal
		}
		for a := Action(0); a < NumActions; a++ {
			q := m.Move(p, a)
			if dist[q] >= 0 {
				continue
			}
			dist[q] = dist[p] + 1
			if q == to {
				return dist[q]
			}
			queue = append(queue, q)
		}
	}
	return -1
}
