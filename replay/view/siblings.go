package view

import (
	"fmt"
	"math"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// MaxBranches is the most branches one sibling diff sets side by side.
const MaxBranches = 8

// BranchesView sets branches of one group side by side from the point
// where their paths part: the turns they share once, then each branch's
// turns from there, by path position, with the scores and routing
// decisions taken along each and each leaf's outcome.
type BranchesView struct {
	Group GroupHead `json:"group"`
	// Fork is the path position where the branches part: every branch's
	// first Fork turns are the same stored turns (0: they share nothing but
	// the prompt).
	Fork int `json:"fork"`
	// ForkNode stores the last shared turn (0 when Fork is 0).
	ForkNode uint64 `json:"fork_node"`
	// Shared are the last few shared turns before the fork, for context
	// (at most SharedContext).
	Shared   []ViewTurn   `json:"shared"`
	Branches []BranchView `json:"branches"`
}

// SharedContext is how many shared turns before the fork a BranchesView
// carries.
const SharedContext = 2

// BranchView is one branch past the fork.
type BranchView struct {
	Node      uint64           `json:"node"`
	Status    model.NodeStatus `json:"status"`
	Reward    *float64         `json:"reward"`
	Advantage *float64         `json:"advantage"`
	Error     string           `json:"error,omitempty"`
	PathLen   int              `json:"path_len"`
	Path      []uint64         `json:"path"` // node ids root first
	// Turns are the branch's turns from path position Fork on.
	Turns []ViewTurn `json:"turns"`
	// Intervals are the scores taken on the branch at or after the fork,
	// each with the routing decision it led to.
	Intervals []BranchInterval `json:"intervals"`
}

// BranchInterval is one process score on a branch's path and what routing
// did with it.
type BranchInterval struct {
	Node     uint64          `json:"node"`
	Interval int             `json:"interval"`
	Turn     int             `json:"turn"` // the path length it was taken at
	Score    float64         `json:"score"`
	Decision *model.Decision `json:"decision"`
}

// ViewBranches reads nodes (2 to MaxBranches of one group) side by side.
func ViewBranches(r *store.RunTx, nodes []uint64) (*BranchesView, error) {
	if len(nodes) < 2 || len(nodes) > MaxBranches {
		return nil, fmt.Errorf("%w: %d branches: compare 2 to %d", ErrViewQuery, len(nodes), MaxBranches)
	}
	type branch struct {
		n     model.Node
		segs  []model.Segment
		turns []model.PathTurn
	}
	bs := make([]branch, len(nodes))
	for i, id := range nodes {
		for _, prev := range nodes[:i] {
			if prev == id {
				return nil, fmt.Errorf("%w: node %d named twice", ErrViewQuery, id)
			}
		}
		n, err := r.Node(id)
		if err != nil {
			return nil, err
		}
		if i > 0 && (n.Group != bs[0].n.Group || n.Step != bs[0].n.Step) {
			return nil, fmt.Errorf("%w: node %d is in group %d, node %d in group %d: branches of one group only",
				ErrViewQuery, id, n.Group, bs[0].n.ID, bs[0].n.Group)
		}
		segs, err := r.Path(id)
		if err != nil {
			return nil, err
		}
		turns, err := r.Trajectory(id)
		if err != nil {
			return nil, err
		}
		bs[i] = branch{n, segs, turns}
	}
	g, err := r.GroupAt(bs[0].n.Step, bs[0].n.Group)
	if err != nil {
		return nil, err
	}
	adv, _, err := leafAdvantages(r, g)
	if err != nil {
		return nil, err
	}
	// The fork: the longest prefix of path positions holding the same
	// stored turn (node, own index) in every branch.
	fork := math.MaxInt
	for _, b := range bs {
		fork = min(fork, len(b.turns))
	}
	for i := 1; i < len(bs); i++ {
		k := 0
		for k < fork && bs[i].turns[k].Node == bs[0].turns[k].Node && bs[i].turns[k].Index == bs[0].turns[k].Index {
			k++
		}
		fork = k
	}
	out := &BranchesView{Group: groupHead(g), Fork: fork, Shared: []ViewTurn{}, Branches: make([]BranchView, 0, len(bs))}
	if fork > 0 {
		out.ForkNode = bs[0].turns[fork-1].Node
		for _, t := range bs[0].turns[max(0, fork-SharedContext):fork] {
			out.Shared = append(out.Shared, viewTurn(t))
		}
	}
	for _, b := range bs {
		v := BranchView{Node: b.n.ID, Status: b.n.Status, Error: b.n.Error, PathLen: b.n.PathLen(),
			Turns: make([]ViewTurn, 0, len(b.turns)-fork), Intervals: []BranchInterval{}}
		if b.n.HasReward {
			v.Reward = finitePtr(b.n.Reward)
		}
		if a, ok := adv[b.n.ID]; ok {
			v.Advantage = finitePtr(a)
		}
		for _, t := range b.turns[fork:] {
			v.Turns = append(v.Turns, viewTurn(t))
		}
		for _, s := range b.segs {
			v.Path = append(v.Path, s.Node)
			pn := b.n
			if s.Node != b.n.ID {
				if pn, err = r.Node(s.Node); err != nil {
					return nil, err
				}
			}
			// An ancestor's scores after its child forked off belong to
			// its other branches (as in ViewTrajectory).
			end := pn.Base + s.Count
			if s.Node == b.n.ID {
				end = math.MaxInt
			}
			for _, sc := range pn.Scores {
				if sc.Turn > end || sc.Turn < fork {
					continue
				}
				iv := BranchInterval{Node: pn.ID, Interval: sc.Interval, Turn: sc.Turn, Score: sc.Value}
				for k := range pn.Decisions {
					if pn.Decisions[k].Interval == sc.Interval {
						d := pn.Decisions[k]
						iv.Decision = &d
					}
				}
				v.Intervals = append(v.Intervals, iv)
			}
		}
		out.Branches = append(out.Branches, v)
	}
	return out, nil
}
