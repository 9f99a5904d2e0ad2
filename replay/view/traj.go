package view

import (
	"math"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// The viewer's figures are computed here, once, so the HTTP server only
// sends them and the page only draws them.

// StripBins is the most values a turn's logprob strip has: long actions are
// summarised as the means of this many runs of consecutive tokens.
const StripBins = 48

// GroupHead is a group without its prompt's token ids: what a reader of
// one of its trajectories or its tree is shown.
type GroupHead struct {
	ID               uint64            `json:"id"`
	Step             uint64            `json:"step"`
	Task             string            `json:"task"`
	Prompt           string            `json:"prompt"`
	Gold             string            `json:"gold,omitempty"`
	Status           model.GroupStatus `json:"status"`
	PromptTokenCount int               `json:"prompt_token_count"`
	Roots            []uint64          `json:"roots"`
	Meta             map[string]string `json:"meta,omitempty"`
}

func groupHead(g model.Group) GroupHead {
	return GroupHead{ID: g.ID, Step: g.Step, Task: g.Task, Prompt: g.Prompt, Gold: g.Gold, Status: g.Status,
		PromptTokenCount: len(g.PromptTokens), Roots: g.Roots, Meta: g.Meta}
}

// ViewTurn is one turn of a trajectory as a reader sees it: its text, how
// many tokens it took and how sure the policy was of them.
type ViewTurn struct {
	Node                  uint64  `json:"node"`
	Index                 int     `json:"index"`
	Action                string  `json:"action"`
	Observation           string  `json:"observation"`
	Reward                float64 `json:"reward"`
	Done                  bool    `json:"done"`
	PolicyVersion         uint64  `json:"policy_version,omitempty"`
	ActionTokenCount      int     `json:"action_token_count"`
	ObservationTokenCount int     `json:"observation_token_count"`
	// MeanLogprob and MinLogprob are over the action's tokens; null when
	// the writer stored no logprobs.
	MeanLogprob *float64 `json:"mean_logprob"`
	MinLogprob  *float64 `json:"min_logprob"`
	// LogprobStrip is the action's logprobs left to right, as the means of
	// at most StripBins equal runs of tokens.
	LogprobStrip []float64 `json:"logprob_strip,omitempty"`
}

// PathNode is one node on a trajectory's path, root first: how many of its
// own turns the path holds and how the node ended.
type PathNode struct {
	ID        uint64           `json:"id"`
	Status    model.NodeStatus `json:"status"`
	Base      int              `json:"base"`
	Count     int              `json:"count"` // its own turns on this path
	HasReward bool             `json:"has_reward"`
	Reward    float64          `json:"reward"`
	Error     string           `json:"error,omitempty"`
	Decisions []model.Decision `json:"decisions,omitempty"` // those taken within the path
}

// PathScore is a process score taken on the path: by which node, after
// which interval, at which path length.
type PathScore struct {
	Node     uint64  `json:"node"`
	Interval int     `json:"interval"`
	Turn     int     `json:"turn"`
	Value    float64 `json:"value"`
}

// TrajectoryView is a node's full trajectory for reading: the group's
// prompt, every turn with its token figures, the scores taken along the
// way, the nodes it passes through and, for a leaf of a closed group, its
// advantage record.
type TrajectoryView struct {
	Node      model.Node       `json:"node"`
	Group     GroupHead        `json:"group"`
	Advantage *model.Advantage `json:"advantage"`
	Inherited int              `json:"inherited"`
	Path      []PathNode       `json:"path"`
	Scores    []PathScore      `json:"scores"`
	Turns     []ViewTurn       `json:"turns"`
}

// ViewTrajectory reads node id's trajectory in r.
func ViewTrajectory(r *store.RunTx, id uint64) (*TrajectoryView, error) {
	n, err := r.Node(id)
	if err != nil {
		return nil, err
	}
	g, err := r.GroupAt(n.Step, n.Group)
	if err != nil {
		return nil, err
	}
	segs, err := r.Path(id)
	if err != nil {
		return nil, err
	}
	turns, err := r.Trajectory(id)
	if err != nil {
		return nil, err
	}
	out := &TrajectoryView{Node: n, Group: groupHead(g), Inherited: n.Base,
		Path: make([]PathNode, 0, len(segs)), Scores: []PathScore{}, Turns: make([]ViewTurn, 0, len(turns))}
	for _, s := range segs {
		pn := n
		if s.Node != id {
			if pn, err = r.Node(s.Node); err != nil {
				return nil, err
			}
		}
		// An ancestor's scores and decisions after its child forked off
		// belong to the ancestor's other branches, not to this path.
		end := pn.Base + s.Count
		if s.Node == id {
			end = math.MaxInt
		}
		p := PathNode{ID: pn.ID, Status: pn.Status, Base: pn.Base, Count: s.Count, HasReward: pn.HasReward, Reward: pn.Reward, Error: pn.Error}
		onPath := map[int]bool{}
		for _, sc := range pn.Scores {
			if sc.Turn <= end {
				out.Scores = append(out.Scores, PathScore{Node: pn.ID, Interval: sc.Interval, Turn: sc.Turn, Value: sc.Value})
				onPath[sc.Interval] = true
			}
		}
		for _, d := range pn.Decisions {
			if onPath[d.Interval] {
				p.Decisions = append(p.Decisions, d)
			}
		}
		out.Path = append(out.Path, p)
	}
	for _, t := range turns {
		out.Turns = append(out.Turns, viewTurn(t))
	}
	if n.Status.Leaf() {
		advs, err := r.Advantages(n.Step, n.Group)
		if err != nil {
			return nil, err
		}
		for i := range advs {
			if advs[i].Leaf == id {
				out.Advantage = &advs[i]
				break
			}
		}
	}
	return out, nil
}

func viewTurn(t model.PathTurn) ViewTurn {
	v := ViewTurn{Node: t.Node, Index: t.Index, Action: t.Action, Observation: t.Observation, Reward: t.Reward, Done: t.Done,
		PolicyVersion: t.PolicyVersion, ActionTokenCount: len(t.ActionTokens), ObservationTokenCount: len(t.ObservationTokens)}
	// A non-finite logprob (a writer's bug) is left out: it would make
	// every figure of the turn NaN and the JSON unencodable.
	lp := make([]float32, 0, len(t.ActionLogprobs))
	for _, x := range t.ActionLogprobs {
		if f := float64(x); !math.IsNaN(f) && !math.IsInf(f, 0) {
			lp = append(lp, x)
		}
	}
	if len(lp) == 0 {
		return v
	}
	sum, low := 0.0, math.Inf(1)
	for _, x := range lp {
		sum += float64(x)
		low = math.Min(low, float64(x))
	}
	mean := sum / float64(len(lp))
	v.MeanLogprob, v.MinLogprob = &mean, &low
	bins := min(len(lp), StripBins)
	v.LogprobStrip = make([]float64, bins)
	for b := range bins {
		lo, hi := b*len(lp)/bins, (b+1)*len(lp)/bins
		s := 0.0
		for _, x := range lp[lo:hi] {
			s += float64(x)
		}
		v.LogprobStrip[b] = s / float64(hi-lo)
	}
	return v
}
