package frozenlake

import (
	"math"
	"testing"
)

func TestProgressScoreBoundsAndEnds(t *testing.T) {
	for _, name := range []string{"4x4", "8x8"} {
		m := mustMap(t, name)
		if s := m.ProgressScore(nil); s != 0 {
			t.Errorf("%s: empty trajectory %v", name, s)
		}
		if s := m.ProgressScore([]int{0}); s != 0 {
			t.Errorf("%s: start is farthest from goal, score %v", name, s)
		}
		if s := m.ProgressScore([]int{0, 0, 0, m.GoalPos()}); s != 1 {
			t.Errorf("%s: goal scores %v", name, s)
		}
		if s := m.ProgressScore([]int{0, -3}); s != 0 {
			t.Errorf("%s: off-board %v", name, s)
		}
		for pos := range m.NumStates() {
			s := m.ProgressScore([]int{0, pos})
			if m.IsHole(pos) && s != 0 {
				t.Errorf("%s: hole %d scores %v", name, pos, s)
			}
		}
		// Random walks: always within [0,1].
		for ep := range uint64(200) {
			st := m.Start()
			path := []int{st.Pos}
			for !st.Done {
				a := Action(Uniform(3, ep, uint64(st.Steps)) * 4)
				st = m.Step(st, a, true, Uniform(4, ep, uint64(st.Steps)))
				path = append(path, st.Pos)
				if s := m.ProgressScore(path); s < 0 || s > 1 || math.IsNaN(s) {
					t.Fatalf("%s: score %v out of [0,1] for %v", name, s, path)
				}
			}
		}
	}
}

// TestProgressScoreMonotone: along a shortest route to the goal every move
// strictly raises the score, and wandering lowers it.
func TestProgressScoreMonotone(t *testing.T) {
	m := mustMap(t, "4x4")
	route := []int{0, 4, 8, 9, 13, 14, 15}
	prev := -1.0
	for i := range route {
		s := m.ProgressScore(route[:i+1])
		if s <= prev {
			t.Errorf("score fell or stalled at %v: %v <= %v", route[:i+1], s, prev)
		}
		prev = s
	}
	direct := m.ProgressScore([]int{0, 1, 2})
	wander := m.ProgressScore([]int{0, 1, 0, 1, 2})
	bumps := m.ProgressScore([]int{0, 0, 0, 1, 2})
	if !(wander < direct && bumps < direct) {
		t.Errorf("revisits not penalised: direct %v wander %v bumps %v", direct, wander, bumps)
	}
	// Closeness 2/6 at cell 2, minus 0.1 × 2 revisits / 4 moves.
	if want := 1 - 4.0/6 - 0.1*2/4; math.Abs(wander-want) > 1e-12 {
		t.Errorf("wander = %v, want %v", wander, want)
	}
	// The penalty never outweighs a full cell of progress on the 4x4.
	if m.ProgressScore([]int{0, 0, 0, 0, 0, 0, 1, 2, 6}) <= direct {
		t.Error("one cell closer with many bumps should still beat direct")
	}
}

func TestFeaturesHandBuilt(t *testing.T) {
	m := mustMap(t, "4x4")
	cases := []struct {
		name    string
		pos     []int
		actions []Action
		want    Features
	}{
		{
			name:    "bump then goal",
			pos:     []int{0, 0, 4, 8, 9, 13, 14, 15},
			actions: []Action{Left, Down, Down, Right, Down, Right, Right},
			want: Features{Steps: 7, Progress: 1, Score: 1, Distinct: 7, Revisits: 1, WallBumps: 1, WallAimed: 1,
				MaxRepeat: 2, ShortestPath: 6, StepsWasted: 1, ReachedGoal: true},
		},
		{
			name:    "straight into a hole",
			pos:     []int{0, 1, 5},
			actions: []Action{Right, Down},
			want: Features{Steps: 2, Progress: 1 - 4.0/6, Score: 0, Distinct: 3, MaxRepeat: 1,
				ShortestPath: 2, FellInHole: true},
		},
		{
			name:    "back and forth",
			pos:     []int{0, 1, 0, 1, 2},
			actions: []Action{Right, Left, Right, Right},
			want: Features{Steps: 4, Progress: 2.0 / 6, Score: 2.0/6 - 0.05, Distinct: 3, Revisits: 2, MaxRepeat: 2,
				ShortestPath: 2, StepsWasted: 2},
		},
		{
			// On ice: the agent aimed up (into the wall) but slipped right.
			name:    "slip off a wall-aimed action",
			pos:     []int{0, 1},
			actions: []Action{Up},
			want: Features{Steps: 1, Progress: 1 - 5.0/6, Score: 1 - 5.0/6, Distinct: 2, WallAimed: 1, MaxRepeat: 1,
				ShortestPath: 1},
		},
		{
			name: "empty",
			want: Features{ShortestPath: -1},
		},
	}
	for _, c := range cases {
		got := m.Features(c.pos, c.actions)
		if math.Abs(got.Progress-c.want.Progress) > 1e-12 || math.Abs(got.Score-c.want.Score) > 1e-12 {
			t.Errorf("%s: progress/score %v/%v, want %v/%v", c.name, got.Progress, got.Score, c.want.Progress, c.want.Score)
		}
		got.Progress, got.Score = c.want.Progress, c.want.Score
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	// Mismatched and bad inputs are tolerated, not fatal.
	f := m.Features([]int{0, 1, 99}, []Action{Right, Action(8), Down, Down})
	if f.Steps != 2 || f.ShortestPath != -1 || f.StepsWasted != 0 || f.WallAimed != 0 {
		t.Errorf("bad input: %+v", f)
	}
	if s := m.Features([]int{0, 0, 4}, []Action{Left, Down}).String(); s == "" {
		t.Error("empty String")
	}
}

func TestShortestPath(t *testing.T) {
	m4, m8 := mustMap(t, "4x4"), mustMap(t, "8x8")
	cases := []struct {
		m        Map
		from, to int
		want     int
	}{
		{m4, 0, 15, 6},
		{m4, 0, 0, 0},
		{m4, 0, 5, 2},   // a hole can be the destination
		{m4, 0, 12, 3},  // down the left edge into the corner hole
		{m4, 10, 3, 3},  // up and right
		{m4, 0, 16, -1}, // off the board
		{m4, -1, 3, -1},
		{m8, 0, 63, 14},
		// (6,2) to (5,0): both straight routes cross holes at (5,1),(6,1),
		// (5,2), so the walker goes round by the bottom row.
		{m8, m8.Index(6, 2), m8.Index(5, 0), 5},
	}
	for _, c := range cases {
		if got := c.m.ShortestPath(c.from, c.to); got != c.want {
			t.Errorf("%s %d->%d: %d, want %d", c.m.Name, c.from, c.to, got, c.want)
		}
	}
	// Holes and the goal cannot be crossed: from a cell enclosed by holes
	// nothing beyond them is reachable.
	boxed, err := NewMap("boxed", []string{"SHF", "HFF", "FFG"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := boxed.ShortestPath(0, 8); got != -1 {
		t.Errorf("boxed start reaches goal in %d", got)
	}
	if got := boxed.ShortestPath(0, 1); got != 1 {
		t.Errorf("boxed start to adjacent hole: %d", got)
	}
}
