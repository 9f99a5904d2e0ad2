package export

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// The JSONL lines. Field names are the export's contract (snake_case); the
// lines carry run and step themselves so a line read on its own is whole.
// They hold every column of the Parquet lake's tables of the same records
// (package lake's rows: nodes, turns, advantages, and the group columns a
// trajectory needs), under the same names; lake's tests compare them.

type jsonTurn struct {
	Node              uint64    `json:"node"`     // the node that stores the turn
	Index             int       `json:"index"`    // its index among that node's own turns
	Position          int       `json:"position"` // in the path from the root: the storing node's base + index
	Action            string    `json:"action"`
	ActionTokens      []uint32  `json:"action_tokens"`
	ActionLogprobs    []float32 `json:"action_logprobs"`
	Observation       string    `json:"observation"`
	ObservationTokens []uint32  `json:"observation_tokens"`
	Reward            float64   `json:"reward"`
	Done              bool      `json:"done"`
	PolicyVersion     uint64    `json:"policy_version"` // the weights that sampled it; 0 when the writer recorded none
}

type jsonAdvantage struct {
	Outcome           float64  `json:"outcome"`
	RubricScore       float64  `json:"rubric_score"`
	Lambda            float64  `json:"lambda"`
	Total             float64  `json:"total"`
	Mean              float64  `json:"mean"`
	Std               float64  `json:"std"`
	Advantage         float64  `json:"advantage"`
	Rubrics           []uint64 `json:"rubrics"`
	ZeroVariance      bool     `json:"zero_variance"`
	ZeroVarianceAfter bool     `json:"zero_variance_after"`
}

type jsonTrajectory struct {
	Run    string `json:"run"`
	Step   uint64 `json:"step"`
	Group  uint64 `json:"group"`
	Task   string `json:"task"`
	Prompt string `json:"prompt"`
	// PromptTokens are the group's prompt token ids, when its writer gave
	// them.
	PromptTokens []uint32       `json:"prompt_tokens"`
	Gold         string         `json:"gold"`
	Leaf         uint64         `json:"leaf"`
	Status       string         `json:"status"`
	Reward       *float64       `json:"reward"` // null when the leaf has none
	Advantage    *jsonAdvantage `json:"advantage"`
	PathLen      int            `json:"path_len"`
	Turns        []jsonTurn     `json:"turns"`
}

type jsonScore struct {
	Interval int     `json:"interval"`
	Turn     int     `json:"turn"`
	Value    float64 `json:"value"`
}

type jsonDecision struct {
	Interval  int     `json:"interval"`
	Action    string  `json:"action"`
	Score     float64 `json:"score"`
	Reference float64 `json:"reference"`
	Delta     float64 `json:"delta"`
	Rule      string  `json:"rule"`
	Children  int     `json:"children"`
}

type jsonNode struct {
	Run       string         `json:"run"`
	Step      uint64         `json:"step"`
	Group     uint64         `json:"group"`
	Node      uint64         `json:"node"`
	Parent    uint64         `json:"parent"` // 0: a root branch
	Fork      int            `json:"fork"`   // parent's own turns it inherits
	Base      int            `json:"base"`   // turns inherited from all ancestors
	Ordinal   int            `json:"ordinal"`
	Depth     int            `json:"depth"`
	Status    string         `json:"status"`
	Leaf      bool           `json:"leaf"`
	Turns     int            `json:"turns"` // own turns
	PathLen   int            `json:"path_len"`
	Reward    *float64       `json:"reward"`
	Scores    []jsonScore    `json:"scores"`
	Decisions []jsonDecision `json:"decisions"`
	Worker    string         `json:"worker"`
	Attempt   int            `json:"attempt"`
	Error     string         `json:"error"` // why a failed branch failed
	// The policy versions of the node's own turns, oldest and newest (0
	// when none recorded one).
	MinPolicyVersion uint64 `json:"min_policy_version"`
	MaxPolicyVersion uint64 `json:"max_policy_version"`
}

// jsonlTable is one table's current file.
type jsonlTable struct {
	name string
	tf   *tableFile
	bw   *bufio.Writer
	enc  *json.Encoder
}

func (t *jsonlTable) at(dir string, step uint64, files *[]ExportFile) error {
	if t.tf != nil && t.tf.step == step {
		return nil
	}
	if err := t.close(files); err != nil {
		return err
	}
	tf, err := createTable(dir, step, t.name+".jsonl")
	if err != nil {
		return err
	}
	t.tf, t.bw = tf, bufio.NewWriterSize(tf.f, 1<<16)
	t.enc = json.NewEncoder(t.bw)
	t.enc.SetEscapeHTML(false)
	return nil
}

func (t *jsonlTable) write(v any) error {
	if err := t.enc.Encode(v); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	t.tf.rows++
	return nil
}

func (t *jsonlTable) close(files *[]ExportFile) error {
	if t.tf == nil {
		return nil
	}
	tf := t.tf
	t.tf = nil
	if err := t.bw.Flush(); err != nil {
		_ = tf.f.Close()
		return fmt.Errorf("export: %w", err)
	}
	ef, err := tf.finish(t.name)
	if err != nil {
		return err
	}
	*files = append(*files, ef)
	return nil
}

type jsonlSink struct {
	dir, run    string
	traj, nodes jsonlTable
	files       []ExportFile
}

func newJSONLSink(dir, run string) *jsonlSink {
	return &jsonlSink{dir: dir, run: run, traj: jsonlTable{name: "trajectories"}, nodes: jsonlTable{name: "nodes"}}
}

func (s *jsonlSink) group(step uint64, g model.Group, nodes []model.Node, turns map[uint64][]model.Turn, advs []model.Advantage) error {
	if err := s.nodes.at(s.dir, step, &s.files); err != nil {
		return err
	}
	if err := s.traj.at(s.dir, step, &s.files); err != nil {
		return err
	}
	byID := make(map[uint64]*model.Node, len(nodes))
	for i := range nodes {
		byID[nodes[i].ID] = &nodes[i]
	}
	adv := make(map[uint64]*model.Advantage, len(advs))
	for i := range advs {
		adv[advs[i].Leaf] = &advs[i]
	}
	for i := range nodes {
		n := &nodes[i]
		if err := s.nodes.write(jsonNodeOf(s.run, n)); err != nil {
			return err
		}
	}
	for i := range nodes {
		n := &nodes[i]
		if !n.Status.Leaf() {
			continue
		}
		path, err := materialise(n, byID, turns)
		if err != nil {
			return err
		}
		line := jsonTrajectory{Run: s.run, Step: g.Step, Group: g.ID, Task: g.Task, Prompt: g.Prompt, PromptTokens: nonNil(g.PromptTokens), Gold: g.Gold,
			Leaf: n.ID, Status: string(n.Status), Reward: rewardOf(n), PathLen: len(path), Turns: path}
		if a := adv[n.ID]; a != nil {
			line.Advantage = &jsonAdvantage{Outcome: a.Outcome, RubricScore: a.RubricScore, Lambda: a.Lambda, Total: a.Total,
				Mean: a.Mean, Std: a.Std, Advantage: a.Advantage, Rubrics: nonNil(a.Rubrics),
				ZeroVariance: a.ZeroVariance, ZeroVarianceAfter: a.ZeroVarianceAfter}
		}
		if err := s.traj.write(line); err != nil {
			return err
		}
	}
	return nil
}

func (s *jsonlSink) close() ([]ExportFile, error) {
	err := s.nodes.close(&s.files)
	if err2 := s.traj.close(&s.files); err == nil {
		err = err2
	}
	return s.files, err
}

func (s *jsonlSink) abort() {
	for _, t := range []*jsonlTable{&s.nodes, &s.traj} {
		if t.tf != nil {
			_ = t.tf.f.Close()
			t.tf = nil
		}
	}
}

func jsonNodeOf(run string, n *model.Node) jsonNode {
	j := jsonNode{Run: run, Step: n.Step, Group: n.Group, Node: n.ID, Parent: n.Parent, Fork: n.Fork, Base: n.Base,
		Ordinal: n.Ordinal, Depth: n.Depth, Status: string(n.Status), Leaf: n.Status.Leaf(), Turns: n.Turns,
		PathLen: n.PathLen(), Reward: rewardOf(n), Worker: n.Worker, Attempt: n.Attempt, Error: n.Error,
		MinPolicyVersion: n.MinVersion, MaxPolicyVersion: n.MaxVersion,
		Scores: make([]jsonScore, len(n.Scores)), Decisions: make([]jsonDecision, len(n.Decisions))}
	for i, s := range n.Scores {
		j.Scores[i] = jsonScore{Interval: s.Interval, Turn: s.Turn, Value: s.Value}
	}
	for i, d := range n.Decisions {
		j.Decisions[i] = jsonDecision{Interval: d.Interval, Action: string(d.Action), Score: d.Score, Reference: d.Reference,
			Delta: d.Delta, Rule: d.Rule, Children: d.Children}
	}
	return j
}

func rewardOf(n *model.Node) *float64 {
	if !n.HasReward {
		return nil
	}
	r := n.Reward
	return &r
}

// materialise builds a node's full path from the group's turns: each
// ancestor's first Fork turns (Fork of the child below it), then the
// node's own. It is what store.RunTx.Trajectory returns, without reading a
// shared prefix once per leaf.
func materialise(n *model.Node, byID map[uint64]*model.Node, turns map[uint64][]model.Turn) ([]jsonTurn, error) {
	type seg struct {
		node  uint64
		count int
	}
	segs := []seg{{n.ID, n.Turns}}
	for c, hops := n, 0; c.Parent != 0; hops++ {
		p := byID[c.Parent]
		if p == nil || hops >= n.Depth {
			return nil, fmt.Errorf("%w: node %d: parent chain leaves its group", store.ErrCorrupt, n.ID)
		}
		segs = append(segs, seg{p.ID, c.Fork})
		c = p
	}
	out := make([]jsonTurn, 0, n.PathLen())
	for i := len(segs) - 1; i >= 0; i-- {
		own := turns[segs[i].node]
		if segs[i].count > len(own) {
			return nil, fmt.Errorf("%w: node %d: path needs %d turns of node %d, which has %d", store.ErrCorrupt, n.ID, segs[i].count, segs[i].node, len(own))
		}
		for k, t := range own[:segs[i].count] {
			out = append(out, jsonTurn{Node: segs[i].node, Index: k, Position: len(out), Action: t.Action,
				ActionTokens: nonNil(t.ActionTokens), ActionLogprobs: nonNil(t.ActionLogprobs), Observation: t.Observation,
				ObservationTokens: nonNil(t.ObservationTokens), Reward: t.Reward, Done: t.Done, PolicyVersion: t.PolicyVersion})
		}
	}
	return out, nil
}

// nonNil makes an absent list an empty one, so JSON readers see [] and not
// null for "no tokens".
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
