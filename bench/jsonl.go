package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
)

// jsonlC is what trainers do today: keep each tree in memory while it
// grows and, when it finishes, append one JSON line per leaf holding the
// leaf's full trajectory (every turn of its path, inherited prefix
// included, with the same fields as model.Turn), encoded with
// encoding/json. The file is fsynced at the end of every transaction.
type jsonlC struct {
	f     *os.File
	w     *bufio.Writer
	enc   *json.Encoder
	path  string
	trees map[uint64]*jtree
	nodes map[uint64]*jnode
}

type jtree struct {
	step   uint64
	task   string
	prompt string
	nodes  []uint64
	adv    []model.Advantage
}

type jnode struct {
	parent    uint64
	fork      int
	turns     []model.Turn
	status    model.NodeStatus
	reward    float64
	scores    []model.Score
	decisions []model.Decision
}

// jsonlLeaf is one line of the dump.
type jsonlLeaf struct {
	Run       string           `json:"run"`
	Step      uint64           `json:"step"`
	Group     uint64           `json:"group"`
	Task      string           `json:"task"`
	Prompt    string           `json:"prompt"`
	Leaf      uint64           `json:"leaf"`
	Status    model.NodeStatus `json:"status"`
	Reward    float64          `json:"reward"`
	Mean      float64          `json:"mean"`
	Std       float64          `json:"std"`
	Advantage float64          `json:"advantage"`
	Scores    []model.Score    `json:"scores,omitempty"`
	Decisions []model.Decision `json:"decisions,omitempty"`
	Turns     []model.Turn     `json:"turns"`
}

func (j *jsonlC) name() string    { return cJSONL }
func (j *jsonlC) files() []string { return []string{j.path} }

func (j *jsonlC) open(path string) error {
	if err := removeStore(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	j.f, j.path = f, path
	j.w = bufio.NewWriterSize(f, 1<<20)
	j.enc = json.NewEncoder(j.w)
	j.trees, j.nodes = map[uint64]*jtree{}, map[uint64]*jnode{}
	return nil
}

func (j *jsonlC) prepare(txn []workload.Op) (any, error) { return txn, nil }

func (j *jsonlC) apply(prepared any) error {
	txn := prepared.([]workload.Op)
	for i := range txn {
		op := &txn[i]
		n := j.nodes[op.Node]
		switch op.Kind {
		case workload.OpOpenGroup:
			j.trees[op.Group] = &jtree{step: op.Step, task: op.Task, prompt: op.Prompt}
		case workload.OpAddNode:
			t := j.trees[op.Group]
			if t == nil || (op.Parent != 0 && j.nodes[op.Parent] == nil) {
				return fmt.Errorf("jsonl: node %d: unknown group %d or parent %d", op.Node, op.Group, op.Parent)
			}
			j.nodes[op.Node] = &jnode{parent: op.Parent, fork: op.Fork, status: model.NodeActive}
			t.nodes = append(t.nodes, op.Node)
		case workload.OpTurns:
			n.turns = append(n.turns[:op.From], op.Turns...)
		case workload.OpStatus:
			n.status = op.Status
		case workload.OpReward:
			n.reward = op.Value
		case workload.OpScore:
			n.scores = append(n.scores, op.Score)
		case workload.OpRoute:
			n.decisions = append(n.decisions, op.Decision)
			switch op.Decision.Action {
			case model.ActionExpand:
				n.status = model.NodeExpanded
			case model.ActionPrune:
				n.status = model.NodePruned
			}
		case workload.OpAdvantage:
			t := j.trees[op.Group]
			t.adv = append(t.adv, op.Adv)
		case workload.OpCloseGroup:
			if err := j.dump(op.Group); err != nil {
				return err
			}
		}
	}
	if err := j.w.Flush(); err != nil {
		return err
	}
	return j.f.Sync()
}

// dump writes one line per leaf of a finished tree and forgets the tree.
func (j *jsonlC) dump(group uint64) error {
	t := j.trees[group]
	for _, a := range t.adv {
		n := j.nodes[a.Leaf]
		line := jsonlLeaf{Run: benchRun, Step: t.step, Group: group, Task: t.task, Prompt: t.prompt, Leaf: a.Leaf,
			Status: n.status, Reward: n.reward, Mean: a.Mean, Std: a.Std, Advantage: a.Advantage,
			Scores: n.scores, Decisions: n.decisions, Turns: j.trajectory(a.Leaf)}
		if err := j.enc.Encode(&line); err != nil {
			return err
		}
	}
	for _, id := range t.nodes {
		delete(j.nodes, id)
	}
	delete(j.trees, group)
	return nil
}

// trajectory is the leaf's full trajectory: each ancestor's first fork turns,
// then its own.
func (j *jsonlC) trajectory(leaf uint64) []model.Turn {
	type seg struct {
		id    uint64
		count int
	}
	segs := []seg{{leaf, len(j.nodes[leaf].turns)}}
	for n := j.nodes[leaf]; n.parent != 0; n = j.nodes[n.parent] {
		segs = append(segs, seg{n.parent, n.fork})
	}
	var out []model.Turn
	for i := len(segs) - 1; i >= 0; i-- {
		out = append(out, j.nodes[segs[i].id].turns[:segs[i].count]...)
	}
	return out
}

func (j *jsonlC) close() error {
	if j.f == nil {
		return nil
	}
	err := j.w.Flush()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	return err
}
