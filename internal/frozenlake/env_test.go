package frozenlake

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func mustMap(t testing.TB, name string) Map {
	t.Helper()
	m, err := MapByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMapsAreGymnasiums(t *testing.T) {
	cases := []struct {
		name  string
		rows  []string
		limit int
	}{
		{"4x4", []string{"SFFF", "FHFH", "FFFH", "HFFG"}, 100},
		{"8x8", []string{"SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG"}, 200},
	}
	for _, c := range cases {
		m := mustMap(t, c.name)
		if m.Name != c.name || !slices.Equal(m.Rows, c.rows) || m.N != len(c.rows) || m.StepLimit != c.limit {
			t.Errorf("%s: got %+v", c.name, m)
		}
		if m.StartPos() != 0 || m.GoalPos() != m.N*m.N-1 || m.NumStates() != m.N*m.N {
			t.Errorf("%s: start %d goal %d states %d", c.name, m.StartPos(), m.GoalPos(), m.NumStates())
		}
		// Each call hands out its own rows: mutating one must not leak.
		m.Rows[0] = "XXXX"
		if again := mustMap(t, c.name); again.Rows[0] != c.rows[0] {
			t.Errorf("%s: map rows shared between callers", c.name)
		}
	}
	if _, err := MapByName("5x5"); err == nil {
		t.Error("MapByName(5x5): want error")
	}
}

func TestNewMapValidates(t *testing.T) {
	bad := [][]string{
		nil,
		{"SF", "F"},
		{"SX", "FG"},
		{"SF", "FF"},
		{"SS", "FG"},
		{"SG", "GF"},
	}
	for _, rows := range bad {
		if _, err := NewMap("x", rows, 10); err == nil {
			t.Errorf("NewMap(%q): want error", rows)
		}
	}
	if _, err := NewMap("x", []string{"SG", "FF"}, 0); err == nil {
		t.Error("zero step limit: want error")
	}
	if _, err := NewMap("x", []string{"SH", "FG"}, 5); err != nil {
		t.Error(err)
	}
}

func TestActionNames(t *testing.T) {
	for a, want := range []string{"left", "down", "right", "up"} {
		if got := Action(a).String(); got != want {
			t.Errorf("Action(%d) = %q, want %q", a, got, want)
		}
		for _, in := range []string{want, strings.ToUpper(want), " " + want + "\n", string(rune('0' + a))} {
			if got, err := ParseAction(in); err != nil || got != Action(a) {
				t.Errorf("ParseAction(%q) = %v, %v", in, got, err)
			}
		}
	}
	if Action(7).String() != "Action(7)" || Action(-1).Valid() {
		t.Error("invalid actions")
	}
	if _, err := ParseAction("jump"); err == nil {
		t.Error("ParseAction(jump): want error")
	}
}

// TestDeterministicTransitions checks moves by hand on the 4x4 board:
// walls keep the agent in place, holes end the episode, only G pays.
func TestDeterministicTransitions(t *testing.T) {
	m := mustMap(t, "4x4")
	cases := []struct {
		pos  int
		a    Action
		want int
		done bool
		rew  float64
	}{
		{0, Left, 0, false, 0},   // wall
		{0, Up, 0, false, 0},     // wall
		{0, Right, 1, false, 0},  // ice
		{0, Down, 4, false, 0},   // ice
		{3, Right, 3, false, 0},  // wall, top-right corner
		{3, Up, 3, false, 0},     // wall
		{1, Down, 5, true, 0},    // hole
		{6, Right, 7, true, 0},   // hole
		{8, Down, 12, true, 0},   // hole on the bottom row
		{13, Down, 13, false, 0}, // bottom wall
		{14, Right, 15, true, 1}, // goal
		{14, Up, 10, false, 0},
		{10, Down, 14, false, 0},
		{14, Left, 13, false, 0},
	}
	for _, c := range cases {
		s := m.Step(State{Pos: c.pos, Steps: 3}, c.a, false, 0.99)
		if s.Pos != c.want || s.Done != c.done || s.Reward != c.rew || s.Truncated || s.Steps != 4 {
			t.Errorf("from %d %v: got %+v, want pos %d done %v reward %v", c.pos, c.a, s, c.want, c.done, c.rew)
		}
	}
	// Reward is 1 exactly when the move enters G, on both maps, every cell,
	// every action; termination exactly on H or G.
	for _, name := range []string{"4x4", "8x8"} {
		m := mustMap(t, name)
		for pos := range m.NumStates() {
			if m.IsTerminal(pos) {
				continue
			}
			for a := range Action(NumActions) {
				s := m.Step(State{Pos: pos}, a, false, 0)
				r, c := m.Row(pos), m.Col(pos)
				dr, dc := [4]int{0, 1, 0, -1}[a], [4]int{-1, 0, 1, 0}[a]
				nr, nc := r+dr, c+dc
				if nr < 0 || nr >= m.N || nc < 0 || nc >= m.N {
					nr, nc = r, c
				}
				want := m.Index(nr, nc)
				if s.Pos != want {
					t.Fatalf("%s %d %v: pos %d want %d", name, pos, a, s.Pos, want)
				}
				if (s.Reward == 1) != m.IsGoal(want) || (s.Reward != 0 && s.Reward != 1) {
					t.Fatalf("%s %d %v: reward %v", name, pos, a, s.Reward)
				}
				if s.Done != m.IsTerminal(want) {
					t.Fatalf("%s %d %v: done %v", name, pos, a, s.Done)
				}
			}
		}
	}
}

func TestDoneStateIsFrozen(t *testing.T) {
	m := mustMap(t, "4x4")
	s := m.Step(m.Start(), Right, false, 0)
	s = m.Step(s, Down, false, 0) // into the hole at 5
	if !s.Done || s.Pos != 5 || !m.Terminated(s) {
		t.Fatalf("want hole: %+v", s)
	}
	if again := m.Step(s, Right, true, 0.5); again != s {
		t.Errorf("stepping a finished episode changed it: %+v -> %+v", s, again)
	}
	// A hand-built state on a hole that is not marked done is absorbing, as
	// in Gymnasium's transition table.
	h := m.Step(State{Pos: 5, Steps: 2}, Right, false, 0)
	if h.Pos != 5 || !h.Done || h.Reward != 0 || h.Steps != 3 {
		t.Errorf("absorbing hole: %+v", h)
	}
	g := m.Step(State{Pos: 15}, Left, false, 0)
	if g.Pos != 15 || !g.Done || g.Reward != 0 {
		t.Errorf("absorbing goal pays again: %+v", g)
	}
	inv := m.Step(State{Pos: 0}, Action(9), false, 0)
	if inv.Pos != 0 || inv.Steps != 1 || inv.Done {
		t.Errorf("invalid action: %+v", inv)
	}
}

func TestStepLimitTruncatesExactly(t *testing.T) {
	for _, c := range []struct {
		name  string
		limit int
	}{{"4x4", 100}, {"8x8", 200}} {
		m := mustMap(t, c.name)
		s := m.Start()
		for i := 1; i <= c.limit; i++ {
			s = m.Step(s, Left, false, 0) // bump the wall forever
			if s.Steps != i {
				t.Fatalf("%s: steps %d want %d", c.name, s.Steps, i)
			}
			if i < c.limit && (s.Done || s.Truncated) {
				t.Fatalf("%s: ended early at %d: %+v", c.name, i, s)
			}
		}
		if !s.Done || !s.Truncated || s.Reward != 0 || m.Terminated(s) {
			t.Fatalf("%s: at limit %+v", c.name, s)
		}
		// Like Gymnasium's TimeLimit, a last step onto G is both terminated
		// and truncated, and still paid.
		g := m.Step(State{Pos: m.GoalPos() - 1, Steps: c.limit - 1}, Right, false, 0)
		if !g.Done || !g.Truncated || g.Reward != 1 || !m.Terminated(g) {
			t.Fatalf("%s: goal on last step %+v", c.name, g)
		}
	}
}

func TestSlipBands(t *testing.T) {
	const third = 1.0 / 3.0
	for a := range Action(NumActions) {
		left, right := (a+3)%4, (a+1)%4
		for _, c := range []struct {
			u    float64
			want Action
		}{
			{0, left}, {0.2, left}, {math.Nextafter(third, 0), left},
			{third, a}, {0.5, a}, {math.Nextafter(2*third, 0), a},
			{2 * third, right}, {0.9, right}, {math.Nextafter(1, 0), right},
		} {
			if got := SlipDirection(a, c.u); got != c.want {
				t.Errorf("SlipDirection(%v, %v) = %v, want %v", a, c.u, got, c.want)
			}
		}
	}
	// Through Step: down from 9 (row 2, col 1) on the 4x4 slips to 8 (left),
	// goes to 13 (down) or slips to 10 (right); never up to 5.
	m := mustMap(t, "4x4")
	for u, want := range map[float64]int{0.1: 8, 0.5: 13, 0.9: 10} {
		if s := m.Step(State{Pos: 9}, Down, true, u); s.Pos != want {
			t.Errorf("slippery down from 9 with u=%v: %d want %d", u, s.Pos, want)
		}
		if s := m.Step(State{Pos: 9}, Down, false, u); s.Pos != 13 {
			t.Errorf("non-slippery ignores u: %d", s.Pos)
		}
	}
}

// TestSlipProbabilities checks that with Uniform as the source each of the
// three outcomes has probability 1/3 and the opposite move never happens.
func TestSlipProbabilities(t *testing.T) {
	m := mustMap(t, "8x8")
	const n = 30000
	from := m.Index(3, 3) // interior ice: all four neighbours distinct
	for a := range Action(NumActions) {
		counts := map[int]int{}
		for i := range uint64(n) {
			s := m.Step(State{Pos: from}, a, true, Uniform(42, KeySlip, uint64(a), i))
			counts[s.Pos]++
		}
		want := []int{m.Move(from, (a+3)%4), m.Move(from, a), m.Move(from, (a+1)%4)}
		if len(counts) != 3 {
			t.Fatalf("%v: outcomes %v, want exactly %v", a, counts, want)
		}
		for _, p := range want {
			// sd of the frequency is sqrt(2/9/n) ≈ 0.0027; allow ~4 sd.
			if f := float64(counts[p]) / n; math.Abs(f-1.0/3) > 0.011 {
				t.Errorf("%v -> %d: frequency %.4f, want 1/3", a, p, f)
			}
		}
	}
}

func TestUniform(t *testing.T) {
	if Uniform(1, 2, 3) != Uniform(1, 2, 3) {
		t.Fatal("not reproducible")
	}
	distinct := map[float64]bool{
		Uniform(1):          true,
		Uniform(2):          true,
		Uniform(1, 0):       true,
		Uniform(1, 0, 0):    true,
		Uniform(1, 2, 3):    true,
		Uniform(1, 3, 2):    true,
		Uniform(1, 2, 3, 0): true,
	}
	if len(distinct) != 7 {
		t.Errorf("collisions between different key lists: %v", distinct)
	}
	const n = 100000
	var bins [10]int
	var sum float64
	for i := range uint64(n) {
		u := Uniform(7, i)
		if u < 0 || u >= 1 {
			t.Fatalf("Uniform out of [0,1): %v", u)
		}
		sum += u
		bins[int(u*10)]++
	}
	if mean := sum / n; math.Abs(mean-0.5) > 0.005 {
		t.Errorf("mean %v", mean)
	}
	for i, c := range bins {
		if math.Abs(float64(c)/n-0.1) > 0.005 {
			t.Errorf("bin %d: %d", i, c)
		}
	}
}

func TestRenderAndObservation(t *testing.T) {
	m := mustMap(t, "4x4")
	if got, want := m.Render(5), "SFFF\nFPFH\nFFFH\nHFFG\n"; got != want {
		t.Errorf("Render:\n%s\nwant\n%s", got, want)
	}
	if got, want := m.Observation(State{Pos: 6, Steps: 3}), "pos=6 row=1 col=2 tile=F steps=3"; got != want {
		t.Errorf("Observation = %q, want %q", got, want)
	}
	if got, want := m.Observation(State{Pos: 15, Steps: 6, Done: true, Reward: 1}), "pos=15 row=3 col=3 tile=G steps=6 done=true reward=1"; got != want {
		t.Errorf("Observation = %q, want %q", got, want)
	}
	if got := m.Observation(State{Pos: 0, Steps: 100, Done: true, Truncated: true}); !strings.HasSuffix(got, "reward=0 truncated=true") {
		t.Errorf("Observation = %q", got)
	}
	if got := m.Observation(State{Pos: 99}); !strings.Contains(got, "tile=?") {
		t.Errorf("off-board observation = %q", got)
	}
}
