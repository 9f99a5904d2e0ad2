package server

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// The server side of PaTR (DESIGN.md §5): a trainer in any language opens a
// group, appends the turns it samples, submits each interval's process
// scores and gets back the routing decisions and new children, finishes the
// leaves with their rewards, and closes the group to get its advantages.
// Routing is tree.Route under the run's stored tree config, so a tree grown
// over HTTP is the tree the Go engine would have grown from the same scores.

// OpenGroupRequest is POST /api/v1/runs/{run}/groups.
type OpenGroupRequest struct {
	Keyed
	Step   uint64            `json:"step"`
	Task   string            `json:"task"`
	Prompt string            `json:"prompt"`
	Gold   string            `json:"gold,omitempty"`
	Meta   map[string]string `json:"meta,omitempty"`
	// PromptTokens are the prompt's token ids, the start of every row of
	// the step's training batch.
	PromptTokens []uint32 `json:"prompt_tokens,omitempty"`
}

// OpenGroupResponse answers POST /api/v1/runs/{run}/groups (201): the group
// with its B0 root branches, active and empty.
type OpenGroupResponse struct {
	Group store.Group `json:"group"`
	Roots []uint64    `json:"roots"`
}

func (s *server) openGroup(w http.ResponseWriter, r *http.Request) error {
	var req OpenGroupRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.Step == 0 {
		return badRequest("step is required (steps start at 1)")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, cfg, err := treeRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		g, err := rt.OpenGroup(store.GroupSpec{Step: req.Step, Task: req.Task, Prompt: req.Prompt, Gold: req.Gold, Meta: req.Meta, PromptTokens: req.PromptTokens})
		if err != nil {
			return 0, nil, err
		}
		for i := 0; i < cfg.Tree.B0; i++ {
			if _, err := rt.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Ordinal: i}); err != nil {
				return 0, nil, err
			}
		}
		if g, err = rt.GroupAt(g.Step, g.ID); err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, OpenGroupResponse{Group: g, Roots: g.Roots}, nil
	})
}

// treeRun returns a run and its stored config, which must have a tree.
func treeRun(tx *store.Tx, run string) (*store.RunTx, RunConfig, error) {
	rt, err := lookupRun(tx, run)
	if err != nil {
		return nil, RunConfig{}, err
	}
	info, err := rt.Info()
	if err != nil {
		return nil, RunConfig{}, err
	}
	cfg, hasTree, err := storedConfig(info)
	if err != nil {
		return nil, cfg, err
	}
	if !hasTree {
		return nil, cfg, conflict("run %q has no tree config (create runs through POST /api/v1/runs to grow trees over the API)", run)
	}
	if err := cfg.Tree.Validate(); err != nil {
		return nil, cfg, conflict("run %q has an unusable tree config: %v", run, err)
	}
	return rt, cfg, nil
}

// openGroupOf finds a group by id and requires it open.
func openGroupOf(rt *store.RunTx, id uint64) (store.Group, error) {
	g, err := rt.Group(id)
	if err != nil {
		return g, err
	}
	if g.Status != store.GroupOpen {
		return g, conflict("group %d is %s", id, g.Status)
	}
	return g, nil
}

// AddNodeRequest is POST /api/v1/runs/{run}/groups/{group}/nodes, for a
// trainer that routes by itself. (group, parent, ordinal) identifies the
// node: asking again for an existing one returns it (200, created false)
// instead of adding a twin.
type AddNodeRequest struct {
	Keyed
	Parent   uint64 `json:"parent"` // 0: a root branch
	Ordinal  int    `json:"ordinal"`
	Fork     int    `json:"fork"`
	EnvState []byte `json:"env_state,omitempty"`
	Worker   string `json:"worker,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
}

// AddNodeResponse answers POST .../nodes: 201 with created true for a new
// node, 200 with created false for the existing one.
type AddNodeResponse struct {
	Node    store.Node `json:"node"`
	Created bool       `json:"created"`
}

func (s *server) addNode(w http.ResponseWriter, r *http.Request) error {
	gid, err := pathID(r, "group")
	if err != nil {
		return err
	}
	var req AddNodeRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if req.Ordinal < 0 || req.Fork < 0 || req.Attempt < 0 {
		return badRequest("ordinal, fork and attempt must be >= 0")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		g, err := openGroupOf(rt, gid)
		if err != nil {
			return 0, nil, err
		}
		siblings := g.Roots
		if req.Parent != 0 {
			p, err := rt.Node(req.Parent)
			if err != nil {
				return 0, nil, err
			}
			if p.Group != g.ID {
				return 0, nil, badRequest("parent %d belongs to group %d, not %d", p.ID, p.Group, g.ID)
			}
			if siblings, err = rt.Children(req.Parent); err != nil {
				return 0, nil, err
			}
		}
		for _, id := range siblings {
			n, err := rt.Node(id)
			if err != nil {
				return 0, nil, err
			}
			if n.Ordinal != req.Ordinal {
				continue
			}
			if n.Fork != req.Fork {
				return 0, nil, conflict("node %d is already ordinal %d under parent %d with fork %d, not %d", n.ID, n.Ordinal, req.Parent, n.Fork, req.Fork)
			}
			return http.StatusOK, AddNodeResponse{Node: n, Created: false}, nil
		}
		n, err := rt.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: req.Parent, Fork: req.Fork,
			Ordinal: req.Ordinal, EnvState: req.EnvState, Worker: req.Worker, Attempt: req.Attempt})
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, AddNodeResponse{Node: n, Created: true}, nil
	})
}

// BranchScore is one active branch's process score at the end of an
// interval. Reward, when given, is the outcome reward the branch keeps if
// routing prunes it; without it a pruned leaf gets the sum of its path's
// turn rewards (what the Go engine records).
type BranchScore struct {
	Node   uint64   `json:"node"`
	Score  *float64 `json:"score"`
	Reward *float64 `json:"reward,omitempty"`
}

// RouteRequest is POST /api/v1/runs/{run}/groups/{group}/route: the scores
// of exactly the group's active branches. Interval, when given, must be the
// group's current interval, which guards against a request meant for an
// interval already routed.
type RouteRequest struct {
	Keyed
	Interval *int          `json:"interval,omitempty"`
	Scores   []BranchScore `json:"scores"`
}

// RouteDecision is a routing decision with the values that produced it
// (tree.Decision) and, for an expansion, the new children's ids.
type RouteDecision struct {
	Node      uint64   `json:"node"`
	Action    string   `json:"action"` // expand, survive or prune
	Score     float64  `json:"score"`
	Reference float64  `json:"reference"`
	Delta     float64  `json:"delta"`
	Rule      string   `json:"rule"`
	Rank      int      `json:"rank"`
	Children  []uint64 `json:"children,omitempty"`
	Reward    *float64 `json:"reward,omitempty"` // a pruned leaf's outcome reward
}

// RouteResponse answers POST .../route: the decisions in node order and the
// group's active branches for the next interval (survivors and children).
type RouteResponse struct {
	Group     uint64          `json:"group"`
	Step      uint64          `json:"step"`
	Interval  int             `json:"interval"` // the interval just routed
	Decisions []RouteDecision `json:"decisions"`
	Active    []uint64        `json:"active"`
}

func (s *server) routeGroup(w http.ResponseWriter, r *http.Request) error {
	gid, err := pathID(r, "group")
	if err != nil {
		return err
	}
	var req RouteRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	if len(req.Scores) == 0 {
		return badRequest("scores is empty: give one score per active branch")
	}
	seen := map[uint64]bool{}
	for i, b := range req.Scores {
		switch {
		case b.Node == 0:
			return badRequest("scores[%d]: node is required", i)
		case seen[b.Node]:
			return badRequest("scores[%d]: node %d is scored twice", i, b.Node)
		case b.Score == nil:
			return badRequest("scores[%d]: score is required", i)
		case !(*b.Score >= 0 && *b.Score <= 1):
			return badRequest("scores[%d]: score %v of node %d is outside [0,1]", i, *b.Score, b.Node)
		}
		seen[b.Node] = true
	}
	if req.Interval != nil && *req.Interval < 0 {
		return badRequest("interval %d is negative", *req.Interval)
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, cfg, err := treeRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		g, err := openGroupOf(rt, gid)
		if err != nil {
			return 0, nil, err
		}
		if req.Interval != nil && *req.Interval != g.Interval {
			return 0, nil, conflict("interval %d: group %d is at interval %d", *req.Interval, g.ID, g.Interval)
		}
		return routeInterval(rt, g, cfg.Tree, req.Scores)
	})
}

func routeInterval(rt *store.RunTx, g store.Group, cfg tree.Config, scores []BranchScore) (int, any, error) {
	byNode := map[uint64]BranchScore{}
	for _, b := range scores {
		n, err := rt.Node(b.Node)
		if err != nil {
			return 0, nil, err
		}
		if n.Group != g.ID {
			return 0, nil, badRequest("node %d belongs to group %d, not %d", n.ID, n.Group, g.ID)
		}
		if n.Status != store.NodeActive {
			return 0, nil, conflict("node %d is %s; only active branches are routed", n.ID, n.Status)
		}
		byNode[b.Node] = b
	}
	nodes, err := rt.GroupNodes(g)
	if err != nil {
		return 0, nil, err
	}
	var active []store.Node
	var missing []string
	for _, n := range nodes {
		if n.Status != store.NodeActive {
			continue
		}
		active = append(active, n)
		if _, ok := byNode[n.ID]; !ok {
			missing = append(missing, fmt.Sprint(n.ID))
		}
	}
	if len(missing) > 0 {
		return 0, nil, badRequest("no score for active node(s) %s of group %d: route scores every active branch (finish the ended ones first)", strings.Join(missing, ", "), g.ID)
	}
	sort.Slice(active, func(i, j int) bool { return active[i].ID < active[j].ID })
	branches := make([]tree.Branch, len(active))
	for i, n := range active {
		rep, err := repeatRun(rt, n, cfg.RepeatPrune)
		if err != nil {
			return 0, nil, err
		}
		branches[i] = tree.Branch{Node: n.ID, Score: *byNode[n.ID].Score, RepeatRun: rep}
	}
	decisions := tree.Route(branches, cfg)
	out := RouteResponse{Group: g.ID, Step: g.Step, Interval: g.Interval, Decisions: make([]RouteDecision, len(decisions)), Active: []uint64{}}
	for i, d := range decisions {
		n := active[i]
		if err := rt.Score(n.ID, store.Score{Interval: g.Interval, Turn: n.PathLen(), Value: d.Score}); err != nil {
			return 0, nil, err
		}
		if err := rt.Route(n.ID, store.Decision{Interval: g.Interval, Action: string(d.Action), Score: d.Score,
			Reference: d.Reference, Delta: d.Delta, Rule: d.Rule, Children: d.Children}); err != nil {
			return 0, nil, err
		}
		rd := RouteDecision{Node: n.ID, Action: string(d.Action), Score: d.Score, Reference: d.Reference,
			Delta: d.Delta, Rule: d.Rule, Rank: d.Rank}
		switch d.Action {
		case tree.Prune:
			reward, err := prunedReward(rt, n, byNode[n.ID].Reward)
			if err != nil {
				return 0, nil, err
			}
			if err := rt.SetReward(n.ID, reward); err != nil {
				return 0, nil, err
			}
			rd.Reward = &reward
		case tree.Expand:
			for c := 0; c < d.Children; c++ {
				child, err := rt.AddNode(store.NodeSpec{Step: g.Step, Group: g.ID, Parent: n.ID, Fork: n.Turns, Ordinal: c, EnvState: n.EnvState})
				if err != nil {
					return 0, nil, err
				}
				rd.Children = append(rd.Children, child.ID)
				out.Active = append(out.Active, child.ID)
			}
		case tree.Survive:
			out.Active = append(out.Active, n.ID)
		}
		out.Decisions[i] = rd
	}
	if err := rt.SetGroupInterval(g.Step, g.ID, g.Interval+1); err != nil {
		return 0, nil, err
	}
	sort.Slice(out.Active, func(i, j int) bool { return out.Active[i] < out.Active[j] })
	return http.StatusOK, out, nil
}

// repeatRun counts identical actions at the end of a node's path, walking
// back through its ancestors but never further than limit turns: routing
// only asks whether the run reached RepeatPrune.
func repeatRun(rt *store.RunTx, n store.Node, limit int) (int, error) {
	if limit <= 0 || n.PathLen() == 0 {
		return 0, nil
	}
	segs, err := rt.Path(n.ID)
	if err != nil {
		return 0, err
	}
	var last string
	count := 0
	for si := len(segs) - 1; si >= 0; si-- {
		for i := segs[si].Count - 1; i >= 0; i-- {
			t, err := rt.Turn(segs[si].Node, i)
			if err != nil {
				return 0, err
			}
			if count == 0 {
				last = t.Action
			} else if t.Action != last {
				return count, nil
			}
			if count++; count >= limit {
				return count, nil
			}
		}
	}
	return count, nil
}

// prunedReward is the client's reward for a pruned branch, or the sum of
// its path's turn rewards.
func prunedReward(rt *store.RunTx, n store.Node, given *float64) (float64, error) {
	if given != nil {
		return *given, nil
	}
	path, err := rt.Trajectory(n.ID)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, t := range path {
		sum += t.Reward
	}
	if math.IsInf(sum, 0) {
		return 0, badRequest("node %d: the sum of its turn rewards overflows", n.ID)
	}
	return sum, nil
}

// LeafScore is a leaf's rubric score, centred within its group.
type LeafScore struct {
	Leaf  uint64   `json:"leaf"`
	Score *float64 `json:"score"`
}

// CloseGroupRequest is POST /api/v1/runs/{run}/groups/{group}/close. With
// RubricScores (one per leaf, each in [-1,1]) the advantages are computed on
// R = reward + Lambda·score; Lambda defaults to the run's rubric lambda.
type CloseGroupRequest struct {
	Keyed
	RubricScores []LeafScore `json:"rubric_scores,omitempty"`
	Lambda       *float64    `json:"lambda,omitempty"`
	Rubrics      []uint64    `json:"rubrics,omitempty"` // the rubric ids the scores came from
	// Pool, instead of RubricScores, shapes the group with the run's rubric
	// buffer: the answers the .../shape exchange gathered (rubrics.go).
	Pool *ShapeAnswers `json:"pool,omitempty"`
}

// CloseGroupResponse answers POST .../close: the closed group and one
// advantage record per leaf, in leaf id order.
type CloseGroupResponse struct {
	Group      store.Group       `json:"group"`
	Advantages []store.Advantage `json:"advantages"`
}

func (s *server) closeGroup(w http.ResponseWriter, r *http.Request) error {
	gid, err := pathID(r, "group")
	if err != nil {
		return err
	}
	var req CloseGroupRequest
	if err := decodeBody(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return err
	}
	scores := map[uint64]float64{}
	for i, ls := range req.RubricScores {
		switch {
		case ls.Leaf == 0:
			return badRequest("rubric_scores[%d]: leaf is required", i)
		case ls.Score == nil:
			return badRequest("rubric_scores[%d]: score is required", i)
		case !(*ls.Score >= -1 && *ls.Score <= 1):
			return badRequest("rubric_scores[%d]: score %v is outside [-1,1] (scores are win rates centred within the group)", i, *ls.Score)
		}
		if _, dup := scores[ls.Leaf]; dup {
			return badRequest("rubric_scores[%d]: leaf %d is scored twice", i, ls.Leaf)
		}
		scores[ls.Leaf] = *ls.Score
	}
	if req.Lambda != nil && !(*req.Lambda >= 0) {
		return badRequest("lambda %v: want a value >= 0", *req.Lambda)
	}
	if len(req.RubricScores) == 0 && (req.Lambda != nil || len(req.Rubrics) > 0) {
		return badRequest("lambda and rubrics need rubric_scores")
	}
	if req.Pool != nil && len(req.RubricScores) > 0 {
		return badRequest("give rubric_scores or pool, not both")
	}
	run := r.PathValue("run")
	return s.write(w, r, run, &req, func(tx *store.Tx) (int, any, error) {
		rt, err := lookupRun(tx, run)
		if err != nil {
			return 0, nil, err
		}
		info, err := rt.Info()
		if err != nil {
			return 0, nil, err
		}
		cfg, _, err := storedConfig(info)
		if err != nil {
			return 0, nil, err
		}
		g, err := openGroupOf(rt, gid)
		if err != nil {
			return 0, nil, err
		}
		if req.Pool != nil {
			return s.closeShaped(rt, cfg, g, *req.Pool)
		}
		nodes, err := rt.GroupNodes(g)
		if err != nil {
			return 0, nil, err
		}
		var leaves []tree.Leaf
		for _, n := range nodes {
			switch {
			case n.Status == store.NodeActive:
				return 0, nil, conflict("group %d still has active node %d: finish or route it first", g.ID, n.ID)
			case !n.Status.Leaf():
				continue
			case !n.HasReward:
				return 0, nil, conflict("leaf %d of group %d has no reward: finish it first", n.ID, g.ID)
			}
			leaves = append(leaves, tree.Leaf{Node: n, Reward: n.Reward})
		}
		sort.Slice(leaves, func(i, j int) bool { return leaves[i].Node.ID < leaves[j].Node.ID })
		var shaping *tree.Shaping
		if len(scores) > 0 {
			shaping = &tree.Shaping{Lambda: cfg.Rubric.Lambda, Rubrics: req.Rubrics}
			if req.Lambda != nil {
				shaping.Lambda = *req.Lambda
			}
			for _, l := range leaves {
				sc, ok := scores[l.Node.ID]
				if !ok {
					return 0, nil, badRequest("rubric_scores has no score for leaf %d", l.Node.ID)
				}
				shaping.Scores = append(shaping.Scores, sc)
			}
			if len(scores) != len(leaves) {
				return 0, nil, badRequest("rubric_scores names %d nodes, but group %d has %d leaves", len(scores), g.ID, len(leaves))
			}
			for _, id := range req.Rubrics {
				if _, err := rt.Rubric(id); err != nil {
					return 0, nil, err
				}
			}
		}
		return finishClose(rt, g, leaves, shaping)
	})
}
