package replay

import (
	"fmt"
	"github.com/patrdb/patrdb/model"
	"math"
	"sort"

	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

// Change classifies a decision the what-if config makes differently from
// the recorded one.
type Change string

const (
	// PrunedEarlier: recorded survive or expand, what-if prune. The branch
	// ends here; whatever the run sampled after it (more of its own turns,
	// its children's subtrees) is not reached.
	PrunedEarlier Change = "pruned-earlier"
	// ExpandedInstead: recorded survive or prune, what-if expand. Its
	// children were never sampled: they count as unobserved.
	ExpandedInstead Change = "expanded-instead"
	// SurvivedInstead: recorded prune or expand, what-if survive. Its
	// continuation was never sampled: one unobserved branch; the recorded
	// children (if any) are not reached.
	SurvivedInstead Change = "survived-instead"
	// Children: expanded both times, into a different number of children.
	// Recorded children beyond the what-if count are not reached; children
	// beyond the recorded count are unobserved.
	Children Change = "children"
	// RuleOnly: same action for a different reason (e.g. survive vs
	// width-cap, max vs median prune).
	RuleOnly Change = "rule"
)

// DecisionDiff is one branch the what-if config routes differently.
type DecisionDiff struct {
	Node     uint64         `json:"node"`
	Change   Change         `json:"change"`
	Recorded model.Decision `json:"recorded"`
	WhatIf   model.Decision `json:"what_if"`
	// Unobserved is how many branches this decision creates that the run
	// never sampled (children of a new or larger expansion, or the
	// continuation of a branch that now survives).
	Unobserved int `json:"unobserved"`
}

// IntervalReport is one routing round of one group under the what-if
// config.
type IntervalReport struct {
	Step     uint64 `json:"step"`
	Group    uint64 `json:"group"`
	Interval int    `json:"interval"`
	// Recorded is how many branches the run routed here; Routed how many
	// of them the what-if config would still have had active (the rest
	// hang below a branch it pruned or did not expand).
	Recorded int `json:"recorded"`
	Routed   int `json:"routed"`
	// Partial: unobserved branches created at an earlier interval would
	// have been active here too. Their scores do not exist, so the
	// decisions here rest on the observed branches alone and may differ
	// from what the config would really have done (a better unobserved
	// branch could have raised the max, taken an expansion slot, ...).
	Partial    bool           `json:"partial"`
	Unobserved int            `json:"unobserved"` // branches created here that were never sampled
	Diffs      []DecisionDiff `json:"diffs,omitempty"`
}

// WhatIfTotals sums a what-if analysis.
type WhatIfTotals struct {
	Groups           int `json:"groups"`
	Intervals        int `json:"intervals"`
	DiffIntervals    int `json:"diff_intervals"`    // intervals with at least one differing decision
	PartialIntervals int `json:"partial_intervals"` // see IntervalReport.Partial
	Decisions        int `json:"decisions"`         // decisions the what-if config made on recorded branches
	Differ           int `json:"differ"`
	PrunedEarlier    int `json:"pruned_earlier"`
	ExpandedInstead  int `json:"expanded_instead"`
	SurvivedInstead  int `json:"survived_instead"`
	Children         int `json:"children"`
	RuleOnly         int `json:"rule_only"`
	// Score-based prunes the what-if config made (rule max or median), and
	// recorded repeat prunes it kept (see the package doc).
	Prunes       int `json:"prunes"`
	RepeatPrunes int `json:"repeat_prunes"`
	// NodesRecorded is every node of the analysed groups; NodesReached the
	// ones the what-if config would also have sampled.
	NodesRecorded int `json:"nodes_recorded"`
	NodesReached  int `json:"nodes_reached"`
	// Unobserved: branches the config would have created that the run
	// never sampled. Counted, never invented: nothing about them (turns,
	// scores, rewards) is known.
	Unobserved int `json:"unobserved"`
	// EnvStepsRecorded: turns the run sampled on the analysed groups.
	// EnvSteps: turns the what-if config would still have sampled on the
	// recorded part of the tree; the unobserved branches would have cost
	// more on top.
	EnvStepsRecorded int `json:"env_steps_recorded"`
	EnvSteps         int `json:"env_steps"`
}

// WhatIfReport is the result of WhatIf.
type WhatIfReport struct {
	Run string `json:"run"`
	// Base is the config the run routed with (tree.RecordedConfig unless given),
	// BaseRecorded whether it came from the run's record; Config is Base
	// with the overrides applied.
	Base         tree.Config      `json:"base"`
	BaseRecorded bool             `json:"base_recorded"`
	Overrides    string           `json:"overrides"`
	Config       tree.Config      `json:"config"`
	Intervals    []IntervalReport `json:"intervals"`
	Totals       WhatIfTotals     `json:"totals"`
}

// WhatIfOptions selects what WhatIf analyses.
type WhatIfOptions struct {
	// Base is the config the run routed with; nil reads it from the run
	// (tree.RecordedConfig).
	Base *tree.Config
	// Overrides change Base into the config to try.
	Overrides Overrides
	// Step restricts the analysis to one step (0: every step), Group to one
	// group (0: every group of the selected steps).
	Step, Group uint64
}

// WhatIf re-runs tree.Route over the recorded scores of every group with
// another config, interval by interval, following only the part of each
// tree the run actually sampled (see the package doc for the model). With
// no overrides and the run's own config it reproduces every recorded
// decision. Groups are read one at a time, so memory is bounded by the
// largest group and the report.
func WhatIf(r *store.RunTx, opts WhatIfOptions) (*WhatIfReport, error) {
	info, err := r.Info()
	if err != nil {
		return nil, err
	}
	rep := &WhatIfReport{Run: r.ID(), Overrides: opts.Overrides.String()}
	if opts.Base != nil {
		rep.Base, rep.BaseRecorded = *opts.Base, false
	} else {
		rep.Base, rep.BaseRecorded = recordedConfig(info)
	}
	if rep.Config, err = opts.Overrides.Apply(rep.Base); err != nil {
		return nil, err
	}
	found := false
	err = r.ForEachGroup(opts.Step, func(g model.Group) error {
		if opts.Group != 0 && g.ID != opts.Group {
			return nil
		}
		found = true
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		rep.Totals.Groups++
		rep.Intervals = append(rep.Intervals, whatIfGroup(g, nodes, rep.Config, &rep.Totals)...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !found && (opts.Step != 0 || opts.Group != 0) {
		return nil, fmt.Errorf("%w: group %d at step %d of run %q", model.ErrNotFound, opts.Group, opts.Step, r.ID())
	}
	for _, iv := range rep.Intervals {
		rep.Totals.Intervals++
		if len(iv.Diffs) > 0 {
			rep.Totals.DiffIntervals++
		}
		if iv.Partial {
			rep.Totals.PartialIntervals++
		}
	}
	return rep, nil
}

// cfNode is a recorded node's fate under the what-if config.
type cfNode struct {
	n       *model.Node
	reached bool
	ended   int // interval at which the what-if ended the node's recorded line; -1 not ended
	spent   int // own turns the what-if would have sampled
}

// whatIfGroup replays one group. Intervals are processed in order; at each,
// the branches are the reached nodes with a score for it, which is the
// recorded set whenever the config agrees with the recorded one.
func whatIfGroup(g model.Group, nodes []model.Node, cfg tree.Config, tot *WhatIfTotals) []IntervalReport {
	cf := make(map[uint64]*cfNode, len(nodes))
	kids := map[uint64][]*model.Node{}
	intervals := map[int]bool{}
	for i := range nodes {
		n := &nodes[i]
		cf[n.ID] = &cfNode{n: n, ended: -1, spent: n.Turns}
		if n.Parent != 0 {
			kids[n.Parent] = append(kids[n.Parent], n)
		}
		for _, s := range n.Scores {
			intervals[s.Interval] = true
		}
		tot.NodesRecorded++
		tot.EnvStepsRecorded += n.Turns
	}
	for _, ks := range kids {
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].Ordinal != ks[j].Ordinal {
				return ks[i].Ordinal < ks[j].Ordinal
			}
			return ks[i].ID < ks[j].ID
		})
	}
	for _, id := range g.Roots {
		if c := cf[id]; c != nil {
			c.reached = true // B0 is not a what-if key: every root branch is sampled
		}
	}
	order := make([]int, 0, len(intervals))
	for iv := range intervals {
		order = append(order, iv)
	}
	sort.Ints(order)

	// Repeat prunes: RepeatRun is not recorded, but RepeatPrune is not a
	// what-if key either, so a branch pruned for repeating would be pruned
	// again at the same point under any what-if config. Route sees
	// RepeatPrune 1 and RepeatRun MaxInt for exactly those branches.
	rcfg := cfg
	rcfg.RepeatPrune = 1

	var out []IntervalReport
	unobservedBefore := 0
	for _, iv := range order {
		rep := IntervalReport{Step: g.Step, Group: g.ID, Interval: iv, Partial: unobservedBefore > 0}
		var in []tree.Branch
		var recorded []model.Decision
		var scoreTurn []int
		for i := range nodes { // nodes are breadth-first; sort the branches by id below
			n := &nodes[i]
			s, ok := scoreAt(n, iv)
			if !ok {
				continue
			}
			rep.Recorded++
			c := cf[n.ID]
			if !c.reached || (c.ended >= 0 && c.ended < iv) {
				continue
			}
			d, _ := decisionAt(n, iv)
			b := tree.Branch{Node: n.ID, Score: s.Value}
			if d.Action == model.ActionPrune && d.Rule == tree.RuleRepeat {
				b.RepeatRun = math.MaxInt
			}
			in = append(in, b)
			recorded = append(recorded, d)
			scoreTurn = append(scoreTurn, s.Turn)
		}
		idx := make([]int, len(in))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return in[idx[a]].Node < in[idx[b]].Node })
		sorted := make([]tree.Branch, len(in))
		for i, j := range idx {
			sorted[i] = in[j]
		}
		decisions := tree.Route(sorted, rcfg)
		rep.Routed = len(decisions)
		for i, d := range decisions {
			j := idx[i]
			rec, c := recorded[j], cf[d.Node]
			wi := d.Record(iv)
			diff := DecisionDiff{Node: d.Node, Recorded: rec, WhatIf: wi}
			tot.Decisions++
			switch {
			case d.Rule == tree.RuleRepeat:
				tot.RepeatPrunes++
			case d.Action == model.ActionPrune:
				tot.Prunes++
			}
			wa, ra, rrule := wi.Action, rec.Action, rec.Rule
			if ra == "" {
				// A score without a decision (the run stopped before routing
				// it) is compared as a plain survive, rule and all.
				ra, rrule = model.ActionSurvive, tree.RuleSurvive
			}
			recKids := kids[d.Node]
			if ra != model.ActionExpand {
				recKids = nil
			}
			switch {
			case wa == ra && wa == model.ActionExpand:
				reach := min(d.Children, len(recKids))
				for _, k := range recKids[:reach] {
					cf[k.ID].reached = true
				}
				diff.Unobserved = max(d.Children-len(recKids), 0)
				if d.Children != len(recKids) || d.Children != rec.Children {
					diff.Change = Children
				} else if wi.Rule != rrule {
					diff.Change = RuleOnly
				}
			case wa == ra:
				if wi.Rule != rrule {
					diff.Change = RuleOnly
				}
			case wa == model.ActionPrune:
				diff.Change = PrunedEarlier
			case wa == model.ActionExpand:
				diff.Change = ExpandedInstead
				diff.Unobserved = d.Children
			default: // survive where the run pruned or expanded
				diff.Change = SurvivedInstead
				diff.Unobserved = 1
			}
			if wa != model.ActionSurvive && ra == model.ActionSurvive {
				// The run went on sampling this branch; the what-if stops
				// it at the turn it was scored at.
				c.ended = iv
				c.spent = min(max(scoreTurn[j]-c.n.Base, 0), c.n.Turns)
			} else if wa != model.ActionSurvive || ra != model.ActionSurvive {
				c.ended = iv
			}
			rep.Unobserved += diff.Unobserved
			if diff.Change != "" {
				rep.Diffs = append(rep.Diffs, diff)
				tot.Differ++
				switch diff.Change {
				case PrunedEarlier:
					tot.PrunedEarlier++
				case ExpandedInstead:
					tot.ExpandedInstead++
				case SurvivedInstead:
					tot.SurvivedInstead++
				case Children:
					tot.Children++
				case RuleOnly:
					tot.RuleOnly++
				}
			}
		}
		unobservedBefore += rep.Unobserved
		tot.Unobserved += rep.Unobserved
		out = append(out, rep)
	}
	for _, c := range cf {
		if c.reached {
			tot.NodesReached++
			tot.EnvSteps += c.spent
		}
	}
	return out
}

func scoreAt(n *model.Node, iv int) (model.Score, bool) {
	for _, s := range n.Scores {
		if s.Interval == iv {
			return s, true
		}
	}
	return model.Score{}, false
}

func decisionAt(n *model.Node, iv int) (model.Decision, bool) {
	for _, d := range n.Decisions {
		if d.Interval == iv {
			return d, true
		}
	}
	return model.Decision{}, false
}
