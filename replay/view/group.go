package view

import (
	"math"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

// TreeNode is one node of a group's tree as the viewer draws it: where its
// span lies, how it ended, and the figures it is coloured by.
type TreeNode struct {
	ID      uint64           `json:"id"`
	Parent  uint64           `json:"parent"`
	Ordinal int              `json:"ordinal"`
	Depth   int              `json:"depth"`
	Fork    int              `json:"fork"`
	Base    int              `json:"base"`
	Turns   int              `json:"turns"`
	Status  model.NodeStatus `json:"status"`
	// LastScore is the value of the node's last process score; null when
	// never scored.
	LastScore *float64 `json:"last_score"`
	// Reward is the outcome reward (null until set); Advantage the leaf's
	// GRPO advantage once the group closed (null otherwise).
	Reward     *float64 `json:"reward"`
	Advantage  *float64 `json:"advantage"`
	ChildCount int      `json:"child_count"`
	Error      string   `json:"error,omitempty"`
}

// Range is the least and greatest of some values; both 0 when there were
// none (Count says).
type Range struct {
	Count int     `json:"count"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	Mean  float64 `json:"mean"`
}

func (r *Range) add(x float64) {
	if r.Count == 0 || x < r.Min {
		r.Min = x
	}
	if r.Count == 0 || x > r.Max {
		r.Max = x
	}
	r.Mean += (x - r.Mean) / float64(r.Count+1)
	r.Count++
}

// GroupSummary is what a group's tree holds, for a reader who cannot take
// in thousands of nodes at once.
type GroupSummary struct {
	Nodes          int                      `json:"nodes"`
	Leaves         int                      `json:"leaves"`
	ByStatus       map[model.NodeStatus]int `json:"by_status"`
	MaxDepth       int                      `json:"max_depth"`
	MaxPath        int                      `json:"max_path"` // longest path, in turns
	TurnsStored    int                      `json:"turns_stored"`
	RewardRange    Range                    `json:"reward_range"`    // over the leaves with a reward
	AdvantageRange Range                    `json:"advantage_range"` // over the leaves with an advantage
	ZeroVariance   bool                     `json:"zero_variance"`
	// DepthCounts[d] is the number of nodes at depth d.
	DepthCounts []int `json:"depth_counts"`
}

// GroupView is a group's tree for the viewer: every node in depth-first
// order (roots by ordinal, children by ordinal), its summary and its leaves.
type GroupView struct {
	Group   GroupHead    `json:"group"`
	Summary GroupSummary `json:"summary"`
	Nodes   []TreeNode   `json:"nodes"`
}

// ViewGroup reads group id's tree in r.
func ViewGroup(r *store.RunTx, id uint64) (*GroupView, error) {
	g, err := r.Group(id)
	if err != nil {
		return nil, err
	}
	nodes, err := r.GroupNodes(g)
	if err != nil {
		return nil, err
	}
	adv, advs, err := leafAdvantages(r, g)
	if err != nil {
		return nil, err
	}
	out := &GroupView{Group: groupHead(g), Nodes: make([]TreeNode, 0, len(nodes))}
	sum := &out.Summary
	sum.ByStatus = map[model.NodeStatus]int{}
	sum.ZeroVariance = replay.GroupFlags(advs).ZeroVariance
	kids := map[uint64][]model.Node{}
	known := make(map[uint64]bool, len(nodes))
	for _, n := range nodes {
		known[n.ID] = true
	}
	var roots []model.Node
	for _, n := range nodes {
		if n.Parent != 0 && known[n.Parent] {
			kids[n.Parent] = append(kids[n.Parent], n)
		} else {
			roots = append(roots, n)
		}
	}
	var visit func(n model.Node)
	visit = func(n model.Node) {
		t := TreeNode{ID: n.ID, Parent: n.Parent, Ordinal: n.Ordinal, Depth: n.Depth, Fork: n.Fork, Base: n.Base,
			Turns: n.Turns, Status: n.Status, ChildCount: len(kids[n.ID]), Error: n.Error}
		if len(n.Scores) > 0 {
			t.LastScore = finitePtr(n.Scores[len(n.Scores)-1].Value)
		}
		if n.HasReward {
			t.Reward = finitePtr(n.Reward)
		}
		if a, ok := adv[n.ID]; ok {
			t.Advantage = finitePtr(a)
		}
		out.Nodes = append(out.Nodes, t)
		sum.Nodes++
		sum.ByStatus[n.Status]++
		sum.TurnsStored += n.Turns
		sum.MaxDepth = max(sum.MaxDepth, n.Depth)
		sum.MaxPath = max(sum.MaxPath, n.PathLen())
		for len(sum.DepthCounts) <= n.Depth {
			sum.DepthCounts = append(sum.DepthCounts, 0)
		}
		sum.DepthCounts[n.Depth]++
		if n.Status.Leaf() {
			sum.Leaves++
			if t.Reward != nil {
				sum.RewardRange.add(*t.Reward)
			}
			if t.Advantage != nil {
				sum.AdvantageRange.add(*t.Advantage)
			}
		}
		for _, c := range sortByOrdinal(kids[n.ID]) {
			visit(c)
		}
	}
	for _, n := range sortByOrdinal(roots) {
		visit(n)
	}
	return out, nil
}

func sortByOrdinal(ns []model.Node) []model.Node {
	for i := 1; i < len(ns); i++ { // insertion sort: siblings are few and nearly sorted
		for j := i; j > 0 && (ns[j].Ordinal < ns[j-1].Ordinal || ns[j].Ordinal == ns[j-1].Ordinal && ns[j].ID < ns[j-1].ID); j-- {
			ns[j], ns[j-1] = ns[j-1], ns[j]
		}
	}
	return ns
}

// finitePtr is x, or nil for a value JSON cannot carry.
func finitePtr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}

// leafAdvantages reads group g's advantage records, and each leaf's
// advantage by its id.
func leafAdvantages(r interface {
	Advantages(step, group uint64) ([]model.Advantage, error)
}, g model.Group) (map[uint64]float64, []model.Advantage, error) {
	advs, err := r.Advantages(g.Step, g.ID)
	if err != nil {
		return nil, nil, err
	}
	adv := make(map[uint64]float64, len(advs))
	for _, a := range advs {
		adv[a.Leaf] = a.Advantage
	}
	return adv, advs, nil
}
