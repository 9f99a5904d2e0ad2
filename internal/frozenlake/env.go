package frozenlake

import (
	"errors"
	"fmt"
	"strings"
)

// Action is a move on the grid. The numbering is Gymnasium's, so recorded
// action ids mean the same thing here as in FrozenLake-v1.
type Action int

// The four actions, numbered as in Gymnasium.
const (
	Left  Action = 0
	Down  Action = 1
	Right Action = 2
	Up    Action = 3
)

// NumActions is the size of the action space.
const NumActions = 4

var actionNames = [NumActions]string{"left", "down", "right", "up"}

// String returns "left", "down", "right" or "up", or "Action(n)" for an
// out-of-range value (so a corrupt record prints instead of panicking).
func (a Action) String() string {
	if a.Valid() {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Valid reports whether a is one of the four actions.
func (a Action) Valid() bool { return a >= 0 && a < NumActions }

// ParseAction is the inverse of [Action.String]; it also accepts the digits
// "0".."3" and ignores case and surrounding space, because action text comes
// back from stores and from text-speaking policies.
func ParseAction(s string) (Action, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	for i, n := range actionNames {
		if t == n || t == string(rune('0'+i)) {
			return Action(i), nil
		}
	}
	return 0, fmt.Errorf("frozenlake: unknown action %q", s)
}

// Map is one FrozenLake board. Rows are the board's lines from top to bottom
// with the tiles S (start), F (frozen), H (hole) and G (goal); N is the side
// length; StepLimit is the TimeLimit wrapper's max_episode_steps.
//
// A Map is a plain value: the methods never modify it and it is safe to share
// between goroutines as long as nobody writes to Rows.
type Map struct {
	Name      string
	Rows      []string
	N         int
	StepLimit int
}

// The maps are built fresh by each call rather than kept in package
// variables, so no caller can mutate another caller's board.
func standardMaps(name string) (rows []string, limit int, ok bool) {
	switch name {
	case "4x4":
		// gymnasium.envs.toy_text.frozen_lake.MAPS["4x4"]; FrozenLake-v1 is
		// registered with max_episode_steps=100.
		return []string{"SFFF", "FHFH", "FFFH", "HFFG"}, 100, true
	case "8x8":
		// MAPS["8x8"]; FrozenLake8x8-v1 has max_episode_steps=200.
		return []string{
			"SFFFFFFF",
			"FFFFFFFF",
			"FFFHFFFF",
			"FFFFFHFF",
			"FFFHFFFF",
			"FHHFFFHF",
			"FHFFHFHF",
			"FFFHFFFG",
		}, 200, true
	}
	return nil, 0, false
}

// MapByName returns Gymnasium's "4x4" or "8x8" map with its step limit.
func MapByName(name string) (Map, error) {
	rows, limit, ok := standardMaps(name)
	if !ok {
		return Map{}, fmt.Errorf("frozenlake: unknown map %q (want 4x4 or 8x8)", name)
	}
	return NewMap(name, rows, limit)
}

// NewMap validates a custom board: square, tiles from "SFHG", exactly one S
// and one G, and a positive step limit. Validation happens here once so Step
// can stay branch-light and never meet a malformed board.
func NewMap(name string, rows []string, stepLimit int) (Map, error) {
	n := len(rows)
	if n == 0 {
		return Map{}, errors.New("frozenlake: empty map")
	}
	if stepLimit <= 0 {
		return Map{}, fmt.Errorf("frozenlake: step limit %d must be positive", stepLimit)
	}
	starts, goals := 0, 0
	cp := make([]string, n)
	for r, row := range rows {
		if len(row) != n {
			return Map{}, fmt.Errorf("frozenlake: row %d has %d tiles, want %d (square map)", r, len(row), n)
		}
		for c := 0; c < n; c++ {
			switch row[c] {
			case 'S':
				starts++
			case 'G':
				goals++
			case 'F', 'H':
			default:
				return Map{}, fmt.Errorf("frozenlake: row %d col %d: bad tile %q", r, c, row[c])
			}
		}
		cp[r] = row
	}
	if starts != 1 || goals != 1 {
		return Map{}, fmt.Errorf("frozenlake: need exactly one S and one G, have %d and %d", starts, goals)
	}
	return Map{Name: name, Rows: cp, N: n, StepLimit: stepLimit}, nil
}

// NumStates is the number of cells, N*N; positions are 0..NumStates()-1.
func (m Map) NumStates() int { return m.N * m.N }

// Row is the row of pos (0 at the top).
func (m Map) Row(pos int) int { return pos / m.N }

// Col is the column of pos (0 at the left).
func (m Map) Col(pos int) int { return pos % m.N }

// Index is the position of (row, col): row*N + col, as in Gymnasium.
func (m Map) Index(row, col int) int { return row*m.N + col }

// InBounds reports whether pos is a cell of the board.
func (m Map) InBounds(pos int) bool { return pos >= 0 && pos < m.NumStates() }

// Tile is the letter at pos, or 0 when pos is off the board (so callers fed
// bad data get "not a hole, not the goal" instead of a panic).
func (m Map) Tile(pos int) byte {
	if !m.InBounds(pos) {
		return 0
	}
	return m.Rows[m.Row(pos)][m.Col(pos)]
}

// IsHole reports whether pos is a hole.
func (m Map) IsHole(pos int) bool { return m.Tile(pos) == 'H' }

// IsGoal reports whether pos is the goal.
func (m Map) IsGoal(pos int) bool { return m.Tile(pos) == 'G' }

// IsTerminal reports whether entering pos ends the episode (hole or goal).
func (m Map) IsTerminal(pos int) bool { return m.IsHole(pos) || m.IsGoal(pos) }

func (m Map) find(tile byte) int {
	for r, row := range m.Rows {
		if c := strings.IndexByte(row, tile); c >= 0 {
			return m.Index(r, c)
		}
	}
	return -1
}

// StartPos is the position of S (0 on both standard maps).
func (m Map) StartPos() int { return m.find('S') }

// GoalPos is the position of G (N*N-1 on both standard maps).
func (m Map) GoalPos() int { return m.find('G') }

// State is everything the environment needs to continue an episode; it is a
// small value so the driver can store it as the node's env-state reference
// and resume from it.
//
// Done is true once the episode is over for any reason: the agent entered a
// hole or the goal (Gymnasium's terminated) or the step limit was reached
// (Truncated, Gymnasium's TimeLimit truncation). As in Gymnasium both can be
// true at once when the last allowed step lands in a hole or on the goal.
// Reward is the reward of the step that produced this state, not a sum.
type State struct {
	Pos       int
	Steps     int
	Done      bool
	Truncated bool
	Reward    float64
}

// Terminated reports whether the episode ended in a hole or at the goal,
// as opposed to only running out of steps.
func (m Map) Terminated(s State) bool { return s.Done && m.IsTerminal(s.Pos) }

// Start is the state at reset: on S, no steps, not done.
func (m Map) Start() State { return State{Pos: m.StartPos()} }

// SlipDirection is the direction actually taken when a is chosen on ice and
// the caller's uniform draw is u. Gymnasium lists the outcomes of action a in
// the order (a-1) mod 4, a, (a+1) mod 4, each with probability 1/3, and
// samples them by inverse CDF; the same bands here make a recorded u mean the
// same move:
//
//	u < 1/3        → (a-1) mod 4  (e.g. down → left)
//	1/3 ≤ u < 2/3  → a            (the intended move)
//	u ≥ 2/3        → (a+1) mod 4  (e.g. down → right)
//
// Both perpendicular moves are possible, never the opposite one.
func SlipDirection(a Action, u float64) Action {
	switch {
	case u < 1.0/3.0:
		return (a + 3) % NumActions
	case u < 2.0/3.0:
		return a
	default:
		return (a + 1) % NumActions
	}
}

// Move is the deterministic effect of moving in direction d from pos:
// walking into the edge of the board leaves the agent where it is, exactly as
// Gymnasium's clamp does. An invalid direction does not move.
func (m Map) Move(pos int, d Action) int {
	r, c := m.Row(pos), m.Col(pos)
	switch d {
	case Left:
		c = max(c-1, 0)
	case Down:
		r = min(r+1, m.N-1)
	case Right:
		c = min(c+1, m.N-1)
	case Up:
		r = max(r-1, 0)
	}
	return m.Index(r, c)
}

// Step applies action a to state s and returns the next state. It is pure:
// the only randomness is u, a uniform in [0,1) chosen by the caller (see
// [Uniform]); on ice (slippery) u picks the direction as documented on
// [SlipDirection], otherwise u is ignored.
//
// The rules are FrozenLake-v1's under its TimeLimit wrapper: the reward is 1
// exactly when the move enters G and 0 otherwise; entering H or G ends the
// episode; when the step count reaches StepLimit the episode is truncated
// (Done and Truncated set), even if that same step also terminated it.
//
// A state that is already Done is returned unchanged: a finished episode
// cannot be continued, and a driver that retries a turn after a crash must
// not advance it twice. A hand-built state that sits on H or G without Done
// is treated like Gymnasium's absorbing terminal state: the agent stays put,
// the step counts, the reward is 0 and the episode is over. An invalid action
// consumes a step without moving, so the step limit still bounds any loop.
func (m Map) Step(s State, a Action, slippery bool, u float64) State {
	if s.Done {
		return s
	}
	next := State{Pos: s.Pos, Steps: s.Steps + 1}
	switch {
	case m.IsTerminal(s.Pos):
		next.Done = true
	case a.Valid():
		d := a
		if slippery {
			d = SlipDirection(a, u)
		}
		next.Pos = m.Move(s.Pos, d)
		if m.IsGoal(next.Pos) {
			next.Reward = 1
		}
		next.Done = m.IsTerminal(next.Pos)
	}
	if next.Steps >= m.StepLimit {
		next.Done, next.Truncated = true, true
	}
	return next
}

// Render draws the board as N lines of text with the agent's cell shown as
// 'P'; the tile under the agent is reported by [Map.Observation]. It is meant
// for logs, the CLI and text-speaking policies.
func (m Map) Render(pos int) string {
	var b strings.Builder
	b.Grow(m.N * (m.N + 1))
	for r, row := range m.Rows {
		for c := 0; c < len(row); c++ {
			if m.Index(r, c) == pos {
				b.WriteByte('P')
			} else {
				b.WriteByte(row[c])
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Observation is the short text recorded as a turn's observation, e.g.
// "pos=5 row=1 col=1 tile=H steps=3 done=true reward=0". The done and reward
// fields appear only once the episode is over, so ongoing turns stay short;
// truncated=true is added when the step limit ended it.
func (m Map) Observation(s State) string {
	tile := m.Tile(s.Pos)
	if tile == 0 {
		tile = '?'
	}
	obs := fmt.Sprintf("pos=%d row=%d col=%d tile=%c steps=%d", s.Pos, m.Row(s.Pos), m.Col(s.Pos), tile, s.Steps)
	if s.Done {
		obs += fmt.Sprintf(" done=true reward=%g", s.Reward)
		if s.Truncated {
			obs += " truncated=true"
		}
	}
	return obs
}

// Stream tags that keep independent draws apart when they share the other
// keys: the driver passes KeyAction when sampling the policy and KeySlip
// when deciding the slip for the same (step, node, turn).
const (
	KeyAction uint64 = 1
	KeySlip   uint64 = 2
)

const golden = 0x9e3779b97f4a7c15

// mix64 is splitmix64's finaliser: a bijection on uint64 whose output bits
// each depend on every input bit.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// Uniform derives a uniform number in [0,1) from a seed and a list of keys,
// e.g. Uniform(seed, KeySlip, step, node, turn). There is no generator
// state: the same arguments always give the same number, and different
// argument lists (including different orders or lengths) give unrelated
// ones. That is what makes crash-resume exact: the draw for a turn does not
// depend on how many draws happened before it in this process.
//
// The keys are absorbed one at a time through splitmix64's mixer; the result
// takes the top 53 bits, so every value is an exact float64 below 1.
func Uniform(seed int64, keys ...uint64) float64 {
	h := mix64(uint64(seed) + golden)
	for _, k := range keys {
		h = mix64((h + golden) ^ mix64(k+golden))
	}
	h = mix64(h ^ (uint64(len(keys)) * golden))
	return float64(h>>11) * 0x1p-53
}
