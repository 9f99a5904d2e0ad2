// Package llmfake is an LLM-agent workload without an LLM: a batch policy
// that answers a whole batch after a fixed latency (as a vLLM server does)
// with 200–600 action tokens and their logprobs per turn, a SWE-style
// environment of 10–30 turns with 1–4 KB observations, and a process
// scorer. Everything is drawn from a hash of the TurnKey, so a tree grown
// twice — serially, in batches, by several workers, or resumed after a
// crash — is the same tree. The benchmarks and the examples use it; a real
// trainer puts its inference client, sandbox and reward model in its place.
package llmfake

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// mix hashes its arguments with splitmix64 rounds.
func mix(vs ...uint64) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, v := range vs {
		h ^= v
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func keyHash(k rollout.TurnKey, salt uint64) uint64 {
	return mix(uint64(k.Seed), k.Step, k.Branch, uint64(k.Path), uint64(k.Attempt), salt)
}

// Policy answers ActBatch after Latency, whatever the batch size.
type Policy struct {
	Latency time.Duration
	Version uint64 // the policy version recorded on every move
	calls   atomic.Int64
}

// Calls is the number of ActBatch calls so far.
func (p *Policy) Calls() int64 { return p.calls.Load() }

var verbs = []string{"open", "grep", "edit", "run_tests", "read", "submit"}

// ActBatch returns one move per request: a tool call as text, its token
// ids, and one logprob per token.
func (p *Policy) ActBatch(ctx context.Context, reqs []rollout.ActRequest) ([]rollout.Move, error) {
	p.calls.Add(1)
	if p.Latency > 0 {
		t := time.NewTimer(p.Latency)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	out := make([]rollout.Move, len(reqs))
	for i, r := range reqs {
		h := keyHash(r.Key, 1)
		n := 200 + int(h%401)
		toks := make([]uint32, n)
		lps := make([]float32, n)
		for j := range toks {
			x := mix(h, uint64(j))
			toks[j] = uint32(x % 151_643)
			lps[j] = -float32(x>>40%4096) / 1024
		}
		verb := verbs[h>>20%uint64(len(verbs))]
		text := fmt.Sprintf("<tool>%s</tool> %s", verb, strings.Repeat("x", n*3))
		out[i] = rollout.Move{Text: text, Tokens: toks, Logprobs: lps, PolicyVersion: p.Version}
	}
	return out, nil
}

// Env is a task whose episodes last 10–30 turns (from the task id) and
// succeed with a probability that grows with the share of "run_tests"
// calls. StepLatency stands for the sandbox's tool execution.
type Env struct {
	StepLatency time.Duration
	// SlowChance of a step's tool calls take SlowLatency instead (a test
	// suite that runs for seconds), drawn from the TurnKey.
	SlowChance  float64
	SlowLatency time.Duration
	// OnStep, when set, sees every step's key and the time its tool took.
	OnStep func(key rollout.TurnKey, took time.Duration)
}

// ToolTime is how long the tool call of the turn at key takes.
func (e *Env) ToolTime(key rollout.TurnKey) time.Duration {
	if e.SlowChance > 0 && float64(keyHash(key, 5)%1_000_000) < e.SlowChance*1_000_000 {
		return e.SlowLatency
	}
	return e.StepLatency
}

type episode struct {
	env   *Env
	task  rollout.Task
	steps int
	tests int
}

func lengthOf(task rollout.Task) int {
	var h uint64
	for _, c := range task.ID {
		h = mix(h, uint64(c))
	}
	return 10 + int(h%21)
}

// Reset starts an episode.
func (e *Env) Reset(_ context.Context, task rollout.Task) (rollout.Episode, error) {
	return &episode{env: e, task: task}, nil
}

// Restore rebuilds an episode from its history (the state, when given, is
// the same two counters).
func (e *Env) Restore(_ context.Context, task rollout.Task, hist []model.Turn, state []byte) (rollout.Episode, error) {
	ep := &episode{env: e, task: task, steps: len(hist)}
	if len(state) == 16 {
		ep.steps = int(binary.LittleEndian.Uint64(state))
		ep.tests = int(binary.LittleEndian.Uint64(state[8:]))
		if ep.steps != len(hist) {
			return nil, fmt.Errorf("llmfake: state says %d steps, history has %d", ep.steps, len(hist))
		}
		return ep, nil
	}
	for _, t := range hist {
		if strings.HasPrefix(t.Action, "<tool>run_tests") {
			ep.tests++
		}
	}
	return ep, nil
}

// Step runs the tool call and answers with 1–4 KB of output.
func (ep *episode) Step(ctx context.Context, key rollout.TurnKey, mv rollout.Move) (rollout.Observation, error) {
	if d := ep.env.ToolTime(key); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return rollout.Observation{}, ctx.Err()
		case <-t.C:
		}
		if ep.env.OnStep != nil {
			ep.env.OnStep(key, d)
		}
	}
	ep.steps++
	if strings.HasPrefix(mv.Text, "<tool>run_tests") {
		ep.tests++
	}
	h := keyHash(key, 2)
	size := 1024 + int(h%3073)
	text := fmt.Sprintf("$ step %d\n%s", ep.steps, strings.Repeat("output line\n", size/12))
	toks := make([]uint32, len(text)/4)
	for j := range toks {
		toks[j] = uint32(mix(h, uint64(j)) % 151_643)
	}
	obs := rollout.Observation{Text: text, Tokens: toks}
	if ep.steps >= lengthOf(ep.task) {
		obs.Done = true
		if mix(h, 3)%100 < uint64(20+60*ep.tests/ep.steps) {
			obs.Reward = 1
		}
	}
	return obs, nil
}

// State is the episode's two counters.
func (ep *episode) State() []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(ep.steps))
	return binary.LittleEndian.AppendUint64(b, uint64(ep.tests))
}

// Scorer rates a partial trajectory by its share of test runs plus noise.
type Scorer struct{}

// Score is in [0,1].
func (Scorer) Score(_ context.Context, task rollout.Task, hist []model.Turn) (float64, error) {
	if len(hist) == 0 {
		return 0, nil
	}
	tests := 0
	for _, t := range hist {
		if strings.HasPrefix(t.Action, "<tool>run_tests") {
			tests++
		}
	}
	noise := float64(mix(uint64(len(hist)), uint64(len(hist[len(hist)-1].Observation)))%100) / 400
	return min(float64(tests)/float64(len(hist))+noise, 1), nil
}

// Tasks returns n SWE-style tasks with prompt token ids.
func Tasks(n int) []rollout.Task {
	out := make([]rollout.Task, n)
	for i := range out {
		prompt := fmt.Sprintf("Fix issue #%d: the test suite fails on edge case %d.", 1000+i, i)
		toks := make([]uint32, 300)
		for j := range toks {
			toks[j] = uint32(mix(uint64(i), uint64(j)) % 151_643)
		}
		out[i] = rollout.Task{ID: fmt.Sprintf("swe-%04d", i), Prompt: prompt, PromptTokens: toks}
	}
	return out
}
