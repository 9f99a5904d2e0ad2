package frozenlake

import (
	"context"
	"fmt"
	"math"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// The adapters below make FrozenLake a tree.Env, its tabular policy a
// tree.Policy and the progress heuristic a tree.Scorer. A turn's
// observation tokens are [position after the move]; its action tokens are
// [action id] with the sampled logprob. Randomness is keyed by (seed, step,
// node, turn index), so a resumed branch samples exactly what an
// uninterrupted one would have.

// positionAfter returns the position after the last turn of history.
func positionAfter(m Map, history []model.Turn) (int, error) {
	if len(history) == 0 {
		return m.StartPos(), nil
	}
	last := history[len(history)-1]
	if len(last.ObservationTokens) != 1 || !m.InBounds(int(last.ObservationTokens[0])) {
		return 0, fmt.Errorf("frozenlake: turn %d has no position token", len(history)-1)
	}
	return int(last.ObservationTokens[0]), nil
}

// Positions lists the visited positions of a trajectory, start included.
func Positions(m Map, history []model.Turn) []int {
	out := make([]int, 0, len(history)+1)
	out = append(out, m.StartPos())
	for _, t := range history {
		if len(t.ObservationTokens) == 1 {
			out = append(out, int(t.ObservationTokens[0]))
		}
	}
	return out
}

// Actions lists the actions of a trajectory.
func Actions(history []model.Turn) []Action {
	out := make([]Action, 0, len(history))
	for _, t := range history {
		if len(t.ActionTokens) == 1 {
			out = append(out, Action(t.ActionTokens[0]))
		}
	}
	return out
}

// TreePolicy samples from a fixed tabular policy (the one of the current
// step; the trainer swaps it between steps). It answers a whole batch of
// branches per call, as an inference server would; Version is recorded on
// every move it samples.
type TreePolicy struct {
	Map     Map
	Policy  *Policy
	Version uint64
}

// ActBatch implements tree.BatchPolicy: one move per request.
func (p *TreePolicy) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	out := make([]rollout.Move, len(reqs))
	for i, r := range reqs {
		m, err := p.Act(ctx, r.Key, r.Task, r.History)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// Act implements tree.Policy.
func (p *TreePolicy) Act(_ context.Context, key rollout.TurnKey, _ rollout.Task, history []model.Turn) (rollout.Move, error) {
	pos, err := positionAfter(p.Map, history)
	if err != nil {
		return rollout.Move{}, err
	}
	u := Uniform(key.Seed, KeyAction, key.Step, key.Node, uint64(key.Index))
	a, logp := p.Policy.Sample(pos, u)
	return rollout.Move{Text: a.String(), Tokens: []uint32{uint32(a)}, Logprobs: []float32{float32(logp)}, PolicyVersion: p.Version}, nil
}

// TreeEnv runs FrozenLake episodes.
type TreeEnv struct {
	Map      Map
	Slippery bool
	// Discount, when in (0,1), makes reaching the goal after T moves pay
	// Discount^(T-1) instead of 1: the discounted return. Undiscounted, a
	// wall bump costs nothing, and since GRPO shares one advantage across a
	// trajectory's moves, nothing stops a bump from becoming the greedy
	// action; discounted, of two successful branches the shorter one wins.
	Discount float64
	// Budget, when set, refuses moves once the run's env steps are spent
	// (see Played).
	Budget *Budget
}

type episode struct {
	env   *TreeEnv
	state State
}

// Reset implements tree.Env.
func (e *TreeEnv) Reset(context.Context, rollout.Task) (rollout.Episode, error) {
	return &episode{env: e, state: e.Map.Start()}, nil
}

// Restore implements tree.Env from the recorded turns: the position is in
// the last observation, the step count is the path length.
func (e *TreeEnv) Restore(_ context.Context, _ rollout.Task, history []model.Turn, _ []byte) (rollout.Episode, error) {
	pos, err := positionAfter(e.Map, history)
	if err != nil {
		return nil, err
	}
	s := State{Pos: pos, Steps: len(history)}
	if len(history) > 0 && history[len(history)-1].Done {
		s.Done = true
	}
	return &episode{env: e, state: s}, nil
}

// Step implements tree.Episode.
func (ep *episode) Step(_ context.Context, key rollout.TurnKey, mv rollout.Move) (rollout.Observation, error) {
	a, err := ParseAction(mv.Text)
	if err != nil {
		return rollout.Observation{}, err
	}
	if !ep.env.Budget.take() {
		ep.state.Done, ep.state.Truncated = true, true
		return rollout.Observation{Text: cutObservation, Done: true}, nil
	}
	u := Uniform(key.Seed, KeySlip, key.Step, key.Node, uint64(key.Index))
	ep.state = ep.env.Map.Step(ep.state, a, ep.env.Slippery, u)
	reward := ep.state.Reward
	if g := ep.env.Discount; reward > 0 && g > 0 && g < 1 {
		reward *= math.Pow(g, float64(ep.state.Steps-1))
	}
	return rollout.Observation{
		Text:   ep.env.Map.Observation(ep.state),
		Tokens: []uint32{uint32(ep.state.Pos)},
		Reward: reward,
		Done:   ep.state.Done,
	}, nil
}

// State implements tree.Episode: FrozenLake restores from the turns.
func (ep *episode) State() []byte { return nil }

// TreeScorer is the progress heuristic as a PaTR process scorer.
type TreeScorer struct{ Map Map }

// Score implements tree.Scorer.
func (s *TreeScorer) Score(_ context.Context, _ rollout.Task, history []model.Turn) (float64, error) {
	return s.Map.ProgressScore(Positions(s.Map, history)), nil
}
