package view

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// NodeQuery selects a run's nodes for the viewer's search. Zero values
// select everything; a nil bound is no bound.
type NodeQuery struct {
	Step     uint64             // only this step (0: every step)
	Statuses []model.NodeStatus // any of these statuses (none: any)
	// LeavesOnly keeps the leaves (completed, pruned, truncated): the
	// trajectories a group trains on.
	LeavesOnly                 bool
	MinReward, MaxReward       *float64 // the outcome reward; a node without one never matches a bound
	MinScore, MaxScore         *float64 // the last process score
	MinAdvantage, MaxAdvantage *float64 // the leaf's advantage
	// PolicyVersion keeps the nodes with a turn sampled by that version
	// (their version range holds it); 0: any.
	PolicyVersion uint64
	Failed        bool // only failed nodes
	Retried       bool // only nodes taken again after a failure (attempt > 0)
	// Text keeps the nodes whose trajectory (the prompt, the inherited
	// prefix and its own turns, actions and observations) contains it,
	// ignoring case.
	Text string
	// Limit is the most matches returned (0: DefaultSearchLimit, at most
	// MaxSearchLimit).
	Limit int
}

// The search's bounds on what one request returns.
const (
	DefaultSearchLimit = 100
	MaxSearchLimit     = 1000
)

// SearchHit is one node the search found, with what the viewer lists of it
// and, for a text search, where the text was found.
type SearchHit struct {
	Node         uint64           `json:"node"`
	Step         uint64           `json:"step"`
	Group        uint64           `json:"group"`
	Task         string           `json:"task"`
	Status       model.NodeStatus `json:"status"`
	Depth        int              `json:"depth"`
	PathLen      int              `json:"path_len"` // turns from the root
	Reward       *float64         `json:"reward"`
	LastScore    *float64         `json:"last_score"`
	Advantage    *float64         `json:"advantage"`
	MinVersion   uint64           `json:"min_policy_version,omitempty"`
	MaxVersion   uint64           `json:"max_policy_version,omitempty"`
	Attempt      int              `json:"attempt,omitempty"`
	Error        string           `json:"error,omitempty"`
	MatchTurn    int              `json:"match_turn"`    // the path position of the first turn holding the text; -1 the prompt, -2 no text searched
	MatchSnippet string           `json:"match_snippet"` // the text around it
	MatchWhere   string           `json:"match_where"`   // "prompt", "action" or "observation"
}

// SearchResult is a search's answer: the first Limit matches, newest step
// first, and whether more matched.
type SearchResult struct {
	Hits    []SearchHit `json:"hits"`
	More    bool        `json:"more"`    // the limit stopped the search
	Scanned int         `json:"scanned"` // nodes looked at
}

// Search finds the nodes of r that q selects, newest step first, groups
// and nodes in id order within it. It reads the groups, nodes and
// advantages it scans, and a text search the turns too; it stops once it
// has one match past the limit.
func Search(r *store.RunTx, q NodeQuery) (*SearchResult, error) {
	if err := q.check(); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	needle := strings.ToLower(q.Text)
	out := &SearchResult{Hits: []SearchHit{}}
	var groups []model.Group
	if err := r.ForEachGroup(q.Step, func(g model.Group) error { groups = append(groups, g); return nil }); err != nil {
		return nil, err
	}
	if q.Step != 0 {
		groups = slices.DeleteFunc(groups, func(g model.Group) bool { return g.Step != q.Step })
	}
	slices.SortStableFunc(groups, func(a, b model.Group) int { return cmp.Compare(b.Step, a.Step) }) // newest step first
	for _, g := range groups {
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return nil, err
		}
		adv, _, err := leafAdvantages(r, g)
		if err != nil {
			return nil, err
		}
		var text *textIndex
		if needle != "" {
			text = &textIndex{r: r, needle: needle, nodes: make(map[uint64]*model.Node, len(nodes)), first: map[uint64]textMatch{}}
			for i := range nodes {
				text.nodes[nodes[i].ID] = &nodes[i]
			}
			if strings.Contains(strings.ToLower(g.Prompt), needle) {
				text.prompt = &textMatch{turn: -1, where: "prompt", snippet: snippet(g.Prompt, needle)}
			}
		}
		for i := range nodes {
			n := &nodes[i]
			out.Scanned++
			hit, ok := q.match(n, adv)
			if !ok {
				continue
			}
			hit.Task, hit.MatchTurn = g.Task, -2
			if text != nil {
				m, err := text.path(n)
				if err != nil {
					return nil, err
				}
				if m == nil {
					continue
				}
				hit.MatchTurn, hit.MatchWhere, hit.MatchSnippet = m.turn, m.where, m.snippet
			}
			if len(out.Hits) == limit {
				out.More = true
				return out, nil
			}
			out.Hits = append(out.Hits, hit)
		}
	}
	return out, nil
}

func (q *NodeQuery) check() error {
	for _, s := range q.Statuses {
		if !slices.Contains(statusOrder, s) {
			return fmt.Errorf("%w: status %q (want one of %v)", ErrViewQuery, s, statusOrder)
		}
	}
	for _, b := range []struct {
		name   string
		lo, hi *float64
	}{{"reward", q.MinReward, q.MaxReward}, {"score", q.MinScore, q.MaxScore}, {"advantage", q.MinAdvantage, q.MaxAdvantage}} {
		for _, v := range []*float64{b.lo, b.hi} {
			if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
				return fmt.Errorf("%w: %s bound %v is not a finite number", ErrViewQuery, b.name, *v)
			}
		}
		if b.lo != nil && b.hi != nil && *b.lo > *b.hi {
			return fmt.Errorf("%w: %s from %v to %v: min above max", ErrViewQuery, b.name, *b.lo, *b.hi)
		}
	}
	if q.Limit < 0 {
		return fmt.Errorf("%w: limit %d", ErrViewQuery, q.Limit)
	}
	return nil
}

// statusOrder lists every node status, for checking a query's.
var statusOrder = []model.NodeStatus{model.NodeActive, model.NodeExpanded, model.NodeCompleted, model.NodePruned,
	model.NodeTruncated, model.NodeFailed}

// match applies every filter but the text to n.
func (q *NodeQuery) match(n *model.Node, adv map[uint64]float64) (SearchHit, bool) {
	hit := SearchHit{Node: n.ID, Step: n.Step, Group: n.Group, Status: n.Status, Depth: n.Depth, PathLen: n.PathLen(),
		MinVersion: n.MinVersion, MaxVersion: n.MaxVersion, Attempt: n.Attempt, Error: n.Error}
	if n.HasReward {
		hit.Reward = finitePtr(n.Reward)
	}
	if len(n.Scores) > 0 {
		hit.LastScore = finitePtr(n.Scores[len(n.Scores)-1].Value)
	}
	if a, ok := adv[n.ID]; ok {
		hit.Advantage = finitePtr(a)
	}
	ok := (len(q.Statuses) == 0 || slices.Contains(q.Statuses, n.Status)) &&
		(!q.LeavesOnly || n.Status.Leaf()) &&
		(!q.Failed || n.Status == model.NodeFailed) &&
		(!q.Retried || n.Attempt > 0) &&
		(q.PolicyVersion == 0 || n.MinVersion <= q.PolicyVersion && q.PolicyVersion <= n.MaxVersion) &&
		within(hit.Reward, q.MinReward, q.MaxReward) &&
		within(hit.LastScore, q.MinScore, q.MaxScore) &&
		within(hit.Advantage, q.MinAdvantage, q.MaxAdvantage)
	return hit, ok
}

// within reports whether v keeps the bounds; a missing v keeps none.
func within(v, lo, hi *float64) bool {
	if lo == nil && hi == nil {
		return true
	}
	return v != nil && (lo == nil || *v >= *lo) && (hi == nil || *v <= *hi)
}

// textMatch is where a text was first found.
type textMatch struct {
	turn    int // path position; -1 the prompt
	where   string
	snippet string
}

// textIndex finds a text in the trajectories of one group's nodes,
// reading each node's own turns once.
type textIndex struct {
	r      *store.RunTx
	needle string
	nodes  map[uint64]*model.Node
	prompt *textMatch
	// first holds each node whose own turns were read: its first own turn
	// holding the text (turn -1 when none does).
	first map[uint64]textMatch
}

// own is the first of n's own turns that holds the text, at its path
// position (turn -1: none).
func (x *textIndex) own(n *model.Node) (textMatch, error) {
	if m, ok := x.first[n.ID]; ok {
		return m, nil
	}
	m := textMatch{turn: -1}
	turns, err := x.r.Turns(n.ID)
	if err != nil {
		return m, err
	}
	for i, t := range turns {
		if strings.Contains(strings.ToLower(t.Action), x.needle) {
			m = textMatch{turn: n.Base + i, where: "action", snippet: snippet(t.Action, x.needle)}
			break
		}
		if strings.Contains(strings.ToLower(t.Observation), x.needle) {
			m = textMatch{turn: n.Base + i, where: "observation", snippet: snippet(t.Observation, x.needle)}
			break
		}
	}
	x.first[n.ID] = m
	return m, nil
}

// path is the first place in n's trajectory that holds the text: the
// prompt, an ancestor's turn before the fork its descendant inherits, or
// n's own; nil when none does.
func (x *textIndex) path(n *model.Node) (*textMatch, error) {
	if x.prompt != nil {
		return x.prompt, nil
	}
	// The chain root→n, each with how many of its own turns the path holds.
	type link struct {
		n    *model.Node
		take int
	}
	chain := []link{{n, math.MaxInt}}
	for cur := n; cur.Parent != 0; {
		p, ok := x.nodes[cur.Parent]
		if !ok {
			break // a parent outside the group: a damaged tree, searched as far as it goes
		}
		chain = append(chain, link{p, cur.Fork})
		cur = p
	}
	for i := len(chain) - 1; i >= 0; i-- {
		m, err := x.own(chain[i].n)
		if err != nil {
			return nil, err
		}
		if m.turn >= 0 && m.turn-chain[i].n.Base < chain[i].take {
			return &m, nil
		}
		if m.turn >= 0 && chain[i].take != math.MaxInt {
			// The ancestor's first match lies past the fork; one before it
			// cannot exist (first is the first), so the path has none here.
			continue
		}
	}
	return nil, nil
}

// snippet is the text around the first occurrence of needle (lower case)
// in s, on one line.
func snippet(s, needle string) string {
	const around = 60
	i := strings.Index(strings.ToLower(s), needle)
	if i < 0 {
		return ""
	}
	lo, hi := max(0, i-around), min(len(s), i+len(needle)+around)
	for lo > 0 && !utf8Start(s[lo]) {
		lo--
	}
	for hi < len(s) && !utf8Start(s[hi]) {
		hi++
	}
	out := strings.Join(strings.Fields(s[lo:hi]), " ")
	if lo > 0 {
		out = "…" + out
	}
	if hi < len(s) {
		out += "…"
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
