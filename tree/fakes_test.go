package tree_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// The fakes below are deterministic: every choice is a hash of the fake's
// arguments (the TurnKey, the task, the history), never of call order, so an
// interrupted-and-resumed rollout must reproduce an uninterrupted one exactly.
// They also check what the engine hands them (the TurnKey's path position
// against the history, the env state against the history), so an engine that
// restores the wrong episode fails loudly instead of drifting.

var errInjected = errors.New("injected fault")

// fault interrupts a rollout at the at-th call (0-based) counted over every
// fake sharing it, as a crash would: it cancels the rollout's context (the
// engine then stops without recording anything for the call) and returns
// errInjected, or, with succeed set, lets the call succeed (a signal
// arriving between calls). at < 0 never fires; calls counts every call
// either way. The engine calls fakes from several goroutines, so the
// counter is guarded.
type fault struct {
	at      int
	cancel  context.CancelFunc
	succeed bool

	mu    sync.Mutex
	calls int
	fired bool
}

func (f *fault) hit() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	n := f.calls
	f.calls++
	fire := n == f.at
	if fire {
		f.fired = true
	}
	f.mu.Unlock()
	if !fire {
		return nil
	}
	if f.cancel != nil {
		f.cancel()
	}
	if f.succeed {
		return nil
	}
	return errInjected
}

// count is the calls so far.
func (f *fault) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// mix hashes its arguments with splitmix64 rounds.
func mix(vs ...uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, v := range vs {
		h ^= v
		h += 0x9e3779b97f4a7c15
		z := h
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		h = z ^ (z >> 31)
	}
	return h
}

func strHash(s string) uint64 {
	f := fnv.New64a()
	f.Write([]byte(s))
	return f.Sum64()
}

// Actions of the hash fakes: the move each makes on a line from 0 to the
// task's goal.
var actionNames = [4]string{"stay", "step", "jump", "back"}

var actionMoves = [4]int{0, 1, 2, -1}

// hashPolicy picks one of four actions from a hash of the TurnKey and the
// last observation.
type hashPolicy struct{ f *fault }

func (p *hashPolicy) Act(_ context.Context, key rollout.TurnKey, task rollout.Task, hist []model.Turn) (rollout.Move, error) {
	if err := p.f.hit(); err != nil {
		return rollout.Move{}, fmt.Errorf("policy: %w", err)
	}
	if key.Path != len(hist) {
		return rollout.Move{}, fmt.Errorf("policy: key path %d with %d turns of history", key.Path, len(hist))
	}
	var last uint64
	if n := len(hist); n > 0 {
		last = uint64(hist[n-1].ObservationTokens[0])
	}
	h := mix(uint64(key.Seed), key.Step, key.Group, key.Node, uint64(key.Index), uint64(key.Path), last, strHash(task.ID))
	a := h % 4
	return rollout.Move{
		Text:     actionNames[a],
		Tokens:   []uint32{uint32(a), uint32(h >> 40)},
		Logprobs: []float32{-float32(h>>8%64) / 16, -0.25},
	}, nil
}

// hashEnv is a walk on a line towards a goal 4–7 cells away (from the task
// id). Reaching the goal ends the episode with reward 1; a hash of the
// TurnKey drops one turn in eight into a hole (the episode ends, reward 0);
// on the lines of even length, stepping onto cell 3 earns 1/8 without
// ending the episode, so unfinished branches carry rewards too.
// With stateful set, episodes report their state and Restore insists that
// the state it is given describes exactly the history it is given.
type hashEnv struct {
	f        *fault
	stateful bool
}

type hashEpisode struct {
	env        *hashEnv
	goal       int
	pos, steps int
	over       bool
}

func goalOf(task rollout.Task) int { return 4 + int(strHash(task.ID)%4) }

func (e *hashEnv) Reset(_ context.Context, task rollout.Task) (rollout.Episode, error) {
	if err := e.f.hit(); err != nil {
		return nil, fmt.Errorf("env reset: %w", err)
	}
	return &hashEpisode{env: e, goal: goalOf(task)}, nil
}

var errStaleState = errors.New("env state does not describe the history")

func (e *hashEnv) Restore(_ context.Context, task rollout.Task, hist []model.Turn, state []byte) (rollout.Episode, error) {
	if err := e.f.hit(); err != nil {
		return nil, fmt.Errorf("env restore: %w", err)
	}
	ep := &hashEpisode{env: e, goal: goalOf(task), steps: len(hist)}
	if n := len(hist); n > 0 {
		ep.pos = int(hist[n-1].ObservationTokens[0])
		ep.over = hist[n-1].Done
	}
	if state != nil {
		pos, k := binary.Uvarint(state)
		steps, k2 := binary.Uvarint(state[k:])
		if k <= 0 || k2 <= 0 || int(pos) != ep.pos || int(steps) != ep.steps {
			return nil, fmt.Errorf("%w: state (pos %d, steps %d), history (pos %d, steps %d)", errStaleState, pos, steps, ep.pos, ep.steps)
		}
	}
	return ep, nil
}

func (ep *hashEpisode) Step(_ context.Context, key rollout.TurnKey, mv rollout.Move) (rollout.Observation, error) {
	if err := ep.env.f.hit(); err != nil {
		return rollout.Observation{}, fmt.Errorf("env step: %w", err)
	}
	if ep.over {
		return rollout.Observation{}, errors.New("env: step after the episode ended")
	}
	if key.Path != ep.steps {
		return rollout.Observation{}, fmt.Errorf("env: key path %d but the episode is at step %d", key.Path, ep.steps)
	}
	ep.pos = max(ep.pos+actionMoves[mv.Tokens[0]], 0)
	ep.steps++
	obs := rollout.Observation{Tokens: []uint32{uint32(ep.pos), uint32(ep.steps)}}
	switch {
	case ep.pos >= ep.goal:
		obs.Reward, obs.Done = 1, true
	case mix(uint64(key.Seed), key.Step, key.Node, uint64(key.Index), 0x401e)%8 == 0:
		obs.Done = true
	case ep.goal%2 == 0 && ep.pos == 3 && actionMoves[mv.Tokens[0]] == 1:
		obs.Reward = 0.125 // a coin on cell 3, reached by a single step
	}
	ep.over = obs.Done
	obs.Text = fmt.Sprintf("pos=%d done=%t", ep.pos, obs.Done)
	return obs, nil
}

func (ep *hashEpisode) State() []byte {
	if !ep.env.stateful {
		return nil
	}
	return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(ep.pos)), uint64(ep.steps))
}

// hashScorer scores progress along the line plus hashed noise, in
// multiples of 1/16 (exact in binary, so prune boundaries are real).
type hashScorer struct{ f *fault }

func (s *hashScorer) Score(_ context.Context, task rollout.Task, hist []model.Turn) (float64, error) {
	if err := s.f.hit(); err != nil {
		return 0, fmt.Errorf("scorer: %w", err)
	}
	return hashScore(task, hist), nil
}

func hashScore(task rollout.Task, hist []model.Turn) float64 {
	if len(hist) == 0 {
		return 0
	}
	last := hist[len(hist)-1]
	pos := int(last.ObservationTokens[0])
	noise := int(mix(uint64(len(hist)), uint64(last.ActionTokens[1]), uint64(pos), strHash(task.ID)) % 7)
	return float64(min(pos*16/goalOf(task)/2+noise, 16)) / 16
}

// fakeShaper gives each leaf a score from a hash of its trajectory, centred
// within the group, and records what it shaped as a custom event in Apply.
type fakeShaper struct {
	f         *fault
	lambda    float64
	failApply error // Apply returns it after writing its event
	skip      bool  // Prepare returns no shaping
	badCount  bool  // Prepare returns one score too many
	begun     []uint64
}

const evShaped model.EventKind = "test.shaped"

var errApply = errors.New("shaper apply failed")

func (s *fakeShaper) BeginStep(_ context.Context, step uint64) error {
	if err := s.f.hit(); err != nil {
		return fmt.Errorf("shaper begin: %w", err)
	}
	s.begun = append(s.begun, step)
	return nil
}

func (s *fakeShaper) Prepare(_ context.Context, step uint64, g model.Group, leaves []tree.Leaf) (*tree.Shaping, error) {
	if err := s.f.hit(); err != nil {
		return nil, fmt.Errorf("shaper prepare: %w", err)
	}
	if s.skip {
		return nil, nil
	}
	scores := shapeScores(leaves)
	if s.badCount {
		scores = append(scores, 0)
	}
	ids := make([]uint64, len(leaves))
	for i, l := range leaves {
		ids[i] = l.Node.ID
	}
	fail := s.failApply
	return &tree.Shaping{
		Scores:  scores,
		Lambda:  s.lambda,
		Rubrics: []uint64{7, 9},
		Apply: func(r *store.RunTx) error {
			if _, err := r.AppendEvent(evShaped, step, g.ID, 0, 0, ids); err != nil {
				return err
			}
			return fail
		},
	}, nil
}

// shapeScores is the fake rubric score: a hash of each leaf's whole
// trajectory in [0,1], centred over the group.
func shapeScores(leaves []tree.Leaf) []float64 {
	out := make([]float64, len(leaves))
	var mean float64
	for i, l := range leaves {
		h := uint64(len(l.Turns))
		for _, t := range l.Turns {
			h = mix(h, uint64(t.ActionTokens[0]), uint64(t.ObservationTokens[0]))
		}
		out[i] = float64(h%9) / 8
		mean += out[i]
	}
	mean /= float64(len(out))
	for i := range out {
		out[i] -= mean
	}
	return out
}

// newRun creates a run for the engine to write into.
func newRun(t testing.TB, db *store.DB, run string, cfg tree.Config) {
	t.Helper()
	err := db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun(run, tree.ConfigJSON(cfg), nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hashOpts returns engine options over the hash fakes, all counting calls
// on f (which may be nil).
func hashOpts(cfg tree.Config, mode tree.CommitMode, stateful bool, f *fault) tree.Options {
	o := tree.Options{
		Config: cfg,
		Policy: &hashPolicy{f: f},
		Env:    &hashEnv{f: f, stateful: stateful},
		Commit: mode,
		// Record for record comparisons need the node ids and event log
		// of a wave at a time; BarrierGroup runs compare trees by branch.
		Barrier: tree.BarrierStep,
	}
	if !cfg.NoScoring {
		o.Scorer = &hashScorer{f: f}
	}
	return o
}

func mustEngine(t testing.TB, db *store.DB, run string, o tree.Options) *tree.Engine {
	t.Helper()
	e, err := tree.New(db, run, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func tasks(n int) []rollout.Task {
	out := make([]rollout.Task, n)
	for i := range out {
		out[i] = rollout.Task{ID: fmt.Sprintf("task-%d", i), Prompt: fmt.Sprintf("walk to the goal (%d)", i), Gold: "G",
			Meta: map[string]string{"i": fmt.Sprint(i)}}
	}
	return out
}

// runDump is everything the engine wrote into a run, for comparing two runs
// record by record. Event times are zeroed; run.* events (written by the
// test when it creates the run, and naming it) are left out.
type runDump struct {
	Groups   []model.Group
	Nodes    []model.Node
	Turns    map[uint64][]model.Turn
	Children map[uint64][]uint64
	Frontier []uint64
	Adv      []model.Advantage
	Events   []model.Event
}

func dumpRun(t testing.TB, db *store.DB, run string) runDump {
	t.Helper()
	d := runDump{Turns: map[uint64][]model.Turn{}, Children: map[uint64][]uint64{}}
	err := db.View(func(tx *store.Tx) error {
		r, err := tx.Run(run)
		if err != nil {
			return err
		}
		if d.Groups, err = r.Groups(0); err != nil {
			return err
		}
		for _, g := range d.Groups {
			ns, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			d.Nodes = append(d.Nodes, ns...)
		}
		sort.Slice(d.Nodes, func(i, j int) bool { return d.Nodes[i].ID < d.Nodes[j].ID })
		for _, n := range d.Nodes {
			if d.Turns[n.ID], err = r.Turns(n.ID); err != nil {
				return err
			}
			if d.Children[n.ID], err = r.Children(n.ID); err != nil {
				return err
			}
		}
		if d.Frontier, err = r.Frontier(); err != nil {
			return err
		}
		if d.Adv, err = r.Advantages(0, 0); err != nil {
			return err
		}
		return r.Events(0, func(e model.Event) error {
			if e.Kind == model.EvRunCreate || e.Kind == model.EvRunStatus {
				return nil
			}
			e.Time = 0
			d.Events = append(d.Events, e)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// diffDump reports the first difference between two dumps in each part, or
// "" when they are equal.
func diffDump(got, want runDump) string {
	if reflect.DeepEqual(got, want) {
		return ""
	}
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < gv.NumField(); i++ {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i), wv.Field(i)
		if reflect.DeepEqual(g.Interface(), w.Interface()) {
			continue
		}
		if g.Kind() == reflect.Slice {
			for j := 0; j < min(g.Len(), w.Len()); j++ {
				if !reflect.DeepEqual(g.Index(j).Interface(), w.Index(j).Interface()) {
					return fmt.Sprintf("%s[%d]:\n got  %+v\n want %+v", name, j, g.Index(j).Interface(), w.Index(j).Interface())
				}
			}
			return fmt.Sprintf("%s: %d entries, want %d", name, g.Len(), w.Len())
		}
		for _, k := range w.MapKeys() {
			if !reflect.DeepEqual(g.MapIndex(k).Interface(), w.MapIndex(k).Interface()) {
				return fmt.Sprintf("%s[%v]:\n got  %+v\n want %+v", name, k, g.MapIndex(k).Interface(), w.MapIndex(k).Interface())
			}
		}
		return fmt.Sprintf("%s: %d entries, want %d", name, g.Len(), w.Len())
	}
	return "differs"
}

// refGRPO computes A_i = (r_i − mean)/(std + eps) with the population std, the
// reference the engine's records are compared against.
func refGRPO(rs []float64, eps float64) (adv []float64, mean, std float64) {
	for _, r := range rs {
		mean += r
	}
	mean /= float64(len(rs))
	for _, r := range rs {
		std += (r - mean) * (r - mean)
	}
	std = math.Sqrt(std / float64(len(rs)))
	adv = make([]float64, len(rs))
	for i, r := range rs {
		adv[i] = (r - mean) / (std + eps)
	}
	return adv, mean, std
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
