package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/model"
	"github.com/spf13/cobra"
)

func newTreeCommand(app *App) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "tree RUN GROUP",
		Short: "The rollout tree of a group: statuses, scores, routing decisions, rewards, advantages",
		Long: `tree draws a group's rollout tree, one line per node: its id and status
(expanded, survived→completed, completed, pruned, truncated, failed, active),
the turn it forks at, its own turns, the process score and routing decision
at each interval, and for a leaf its outcome reward and advantage.

GROUP is a group id, "latest" (the run's most recent group) or "step:N" (every
group of step N).

--format dot emits Graphviz (patrdb tree RUN GROUP --format dot | dot -Tsvg),
nodes coloured by status and edges labelled with the fork turn; --format json
(or --json) a nested structure.` + remoteHelp,
		Args:              needArgs("RUN", "GROUP"),
		ValidArgsFunction: app.completeRunGroups,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if app.json && cmd.Flags().Changed("format") && format != "json" {
			return usageErrorf("--json and --format %s ask for two formats", format)
		}
		return app.tree(rf, args[0], args[1], format)
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, dot or json")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "dot", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// treeOutput is `tree --json` (and --format json).
type treeOutput struct {
	Run    string      `json:"run"`
	Groups []groupTree `json:"groups"`
}

// groupTree is one group as the store holds it, its leaves' advantage
// records, and its nodes nested under their parents.
type groupTree struct {
	Group      model.Group       `json:"group"`
	Advantages []model.Advantage `json:"advantages"` // one per leaf once the group is closed; empty before
	Tree       []treeNode        `json:"tree"`       // the root branches, in Group.Roots order

	nodes, leaves int
	adv           map[uint64]model.Advantage // by leaf
}

// treeNode is a node with its children, ordered by ordinal.
type treeNode struct {
	model.Node
	Children []treeNode `json:"children"`

	adv *model.Advantage // the leaf's advantage record, once the group is closed
}

// survived is whether routing kept the node ("survive") at least once.
func (n treeNode) survived() bool {
	for _, d := range n.Decisions {
		if d.Action == model.ActionSurvive {
			return true
		}
	}
	return false
}

func (a *App) tree(rf *remoteFlags, runArg, groupArg, format string) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	if a.json {
		format = "json"
	}
	switch format {
	case "text", "dot", "json":
	default:
		return usageErrorf("--format %q: want text, dot or json", format)
	}
	sel, err := parseGroupSpec(groupArg)
	if err != nil {
		return err
	}
	out := treeOutput{Run: id}
	err = a.readRun(rf, id, func(r runReader) error {
		groups, err := sel.resolve(r)
		if err != nil {
			return err
		}
		for _, g := range groups {
			gt, err := buildGroupTree(r, g)
			if err != nil {
				return err
			}
			out.Groups = append(out.Groups, gt)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(a.stdout)
	switch format {
	case "json":
		return a.printJSON(out)
	case "dot":
		writeDot(w, out)
	default:
		for i, g := range out.Groups {
			if i > 0 {
				fmt.Fprintln(w)
			}
			a.writeTreeText(w, g)
		}
	}
	return w.Flush()
}

// groupSpec is a parsed GROUP argument: an id, "latest" or "step:N".
type groupSpec struct {
	id     uint64
	step   uint64
	latest bool
}

func parseGroupSpec(s string) (groupSpec, error) {
	switch {
	case s == "latest":
		return groupSpec{latest: true}, nil
	case strings.HasPrefix(s, "step:"):
		n, err := strconv.ParseUint(strings.TrimPrefix(s, "step:"), 10, 64)
		if err != nil || n == 0 {
			return groupSpec{}, usageErrorf("GROUP %q: step:N wants a positive step number", s)
		}
		return groupSpec{step: n}, nil
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return groupSpec{}, usageErrorf("GROUP %q: want a group id, latest or step:N", s)
	}
	return groupSpec{id: id}, nil
}

// resolve finds the groups a spec names, or a not-found error naming it.
func (sp groupSpec) resolve(r runReader) ([]model.Group, error) {
	switch {
	case sp.latest:
		g, err := r.LatestGroup()
		if isNotFound(err) {
			return nil, notFoundErrorf("run %q has no groups", r.ID())
		}
		if err != nil {
			return nil, err
		}
		return []model.Group{g}, nil
	case sp.step != 0:
		gs, err := r.Groups(sp.step)
		if err != nil {
			return nil, err
		}
		if len(gs) == 0 {
			return nil, notFoundErrorf("step %d of run %q has no groups", sp.step, r.ID())
		}
		return gs, nil
	}
	g, err := r.Group(sp.id)
	if err != nil {
		if isNotFound(err) {
			return nil, notFoundErrorf("group %d not found in run %q", sp.id, r.ID())
		}
		return nil, err
	}
	return []model.Group{g}, nil
}

// buildGroupTree reads a group's nodes and advantages into the nested form
// every output format renders from.
func buildGroupTree(r runReader, g model.Group) (groupTree, error) {
	gt := groupTree{Group: g, Tree: []treeNode{}, adv: map[uint64]model.Advantage{}}
	nodes, err := r.GroupNodes(g)
	if err != nil {
		return gt, err
	}
	advs, err := r.Advantages(g.Step, g.ID)
	if err != nil {
		return gt, err
	}
	gt.Advantages = nonNil(advs)
	for _, ad := range advs {
		gt.adv[ad.Leaf] = ad
	}
	kids := map[uint64][]model.Node{}
	for _, n := range nodes {
		kids[n.Parent] = append(kids[n.Parent], n)
		if n.Status.Leaf() {
			gt.leaves++
		}
	}
	gt.nodes = len(nodes)
	var build func(n model.Node) treeNode
	build = func(n model.Node) treeNode {
		t := treeNode{Node: n, Children: []treeNode{}}
		if ad, ok := gt.adv[n.ID]; ok {
			t.adv = &ad
		}
		cs := kids[n.ID]
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].Ordinal != cs[j].Ordinal {
				return cs[i].Ordinal < cs[j].Ordinal
			}
			return cs[i].ID < cs[j].ID
		})
		for _, c := range cs {
			t.Children = append(t.Children, build(c))
		}
		return t
	}
	roots := map[uint64]model.Node{}
	for _, n := range kids[0] {
		roots[n.ID] = n
	}
	for _, id := range g.Roots {
		if n, ok := roots[id]; ok {
			gt.Tree = append(gt.Tree, build(n))
		}
	}
	return gt, nil
}

// statusLabel is the status a person reads: a completed node that was
// routed "survive" on the way is survived→completed.
func statusLabel(n treeNode) string {
	if n.Status == model.NodeCompleted && n.survived() {
		return "survived→completed"
	}
	return string(n.Status)
}

// statusColor is the ANSI colour of a status in text output.
func statusColor(status string) string {
	switch model.NodeStatus(status) {
	case model.NodeActive:
		return ansiYellow
	case model.NodeExpanded:
		return ansiBlue
	case model.NodeCompleted:
		return ansiGreen
	case model.NodePruned, model.NodeFailed:
		return ansiRed
	case model.NodeTruncated:
		return ansiMagenta
	}
	return ""
}

func (a *App) writeTreeText(w io.Writer, g groupTree) {
	head := fmt.Sprintf("group %d · step %d · task %s · %s · interval %d · %s, %s",
		g.Group.ID, g.Group.Step, strconv.Quote(g.Group.Task), g.Group.Status, g.Group.Interval, plural(g.nodes, "node", "nodes"), plural(g.leaves, "leaf", "leaves"))
	if len(g.Advantages) > 0 {
		head += " · " + baselineText(g)
	}
	fmt.Fprintln(w, head)
	var walk func(nodes []treeNode, prefix string)
	walk = func(nodes []treeNode, prefix string) {
		for i, n := range nodes {
			branch, next := "├── ", "│   "
			if i == len(nodes)-1 {
				branch, next = "└── ", "    "
			}
			fmt.Fprintf(w, "%s%s%s\n", prefix, branch, a.nodeLine(n))
			walk(n.Children, prefix+next)
		}
	}
	walk(g.Tree, "")
}

// baselineText describes the group's advantage baseline: the mean and std
// of the (shaped) rewards, and whether the outcomes alone had no variance.
// Every advantage record of a group carries the same group figures.
func baselineText(g groupTree) string {
	f := g.Advantages[0]
	s := fmt.Sprintf("mean %s std %s", fmtNum(f.Mean), fmtNum(f.Std))
	switch {
	case f.Unlocked():
		s += " (zero-variance outcomes, unlocked by rubric shaping)"
	case f.ZeroVariance:
		s += " (zero variance)"
	}
	return s
}

// nodeLine is one node in the text tree.
func (a *App) nodeLine(n treeNode) string {
	parts := []string{a.paint(statusColor(string(n.Status)), fmt.Sprintf("%d %s", n.ID, statusLabel(n)))}
	if n.Depth > 0 {
		parts = append(parts, fmt.Sprintf("fork@%d", n.Base))
	}
	parts = append(parts, plural(n.Turns, "turn", "turns"))
	parts = append(parts, intervalNotes(n)...)
	if n.HasReward {
		parts = append(parts, "reward "+fmtNum(n.Reward))
	}
	if n.adv != nil {
		parts = append(parts, "adv "+fmtSigned(n.adv.Advantage))
	}
	if n.Attempt > 0 {
		parts = append(parts, plural(n.Attempt, "retry", "retries"))
	}
	if n.Error != "" {
		label := "error: "
		if n.Status != model.NodeFailed {
			label = "last error: "
		}
		parts = append(parts, label+n.Error)
	}
	return strings.Join(parts, " · ")
}

// intervalNotes renders each interval's score and decision:
// "i0 0.80 expand×2", "i1 0.10 prune: 0.10 < max 0.80 − 0.50".
func intervalNotes(n treeNode) []string {
	type iv struct {
		score    *float64
		decision *model.Decision
	}
	byInterval := map[int]*iv{}
	var order []int
	get := func(i int) *iv {
		if byInterval[i] == nil {
			byInterval[i] = &iv{}
			order = append(order, i)
		}
		return byInterval[i]
	}
	for i := range n.Scores {
		get(n.Scores[i].Interval).score = &n.Scores[i].Value
	}
	for i := range n.Decisions {
		get(n.Decisions[i].Interval).decision = &n.Decisions[i]
	}
	sort.Ints(order)
	out := make([]string, 0, len(order))
	for _, i := range order {
		x := byInterval[i]
		s := fmt.Sprintf("i%d", i)
		if x.score != nil {
			s += " " + fmtScore(*x.score)
		} else if x.decision != nil {
			s += " " + fmtScore(x.decision.Score)
		}
		if d := x.decision; d != nil {
			s += " " + decisionText(*d)
		}
		out = append(out, s)
	}
	return out
}

func decisionText(d model.Decision) string {
	switch d.Action {
	case model.ActionExpand:
		if d.Children > 0 {
			return fmt.Sprintf("expand×%d", d.Children)
		}
		return "expand"
	case model.ActionPrune:
		switch d.Rule {
		case "max", "median":
			return fmt.Sprintf("prune: %s < %s %s − %s", fmtScore(d.Score), d.Rule, fmtScore(d.Reference), fmtScore(d.Delta))
		case "":
			return "prune"
		}
		return "prune (" + d.Rule + ")"
	case model.ActionSurvive:
		if d.Rule != "" && d.Rule != string(model.ActionSurvive) {
			return "survive (" + d.Rule + ")"
		}
		return "survive"
	}
	return string(d.Action)
}

// dotFill is the Graphviz fill colour of a status.
func dotFill(status string) string {
	switch model.NodeStatus(status) {
	case model.NodeActive:
		return "#fff3b0"
	case model.NodeExpanded:
		return "#c6dbef"
	case model.NodeCompleted:
		return "#c7e9c0"
	case model.NodePruned:
		return "#fcbba1"
	case model.NodeTruncated:
		return "#dadaeb"
	case model.NodeFailed:
		return "#fb6a4a"
	}
	return "#ffffff"
}

// writeDot renders the groups as one Graphviz digraph: a box per group
// feeding its root branches, a box per node filled by status, each edge to a
// child labelled with the turn at which it forks.
func writeDot(w io.Writer, out treeOutput) {
	fmt.Fprintf(w, "digraph %s {\n", dotQuote("patrdb "+out.Run))
	fmt.Fprintln(w, `  graph [rankdir=TB, fontname="Helvetica"];`)
	fmt.Fprintln(w, `  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];`)
	fmt.Fprintln(w, `  edge [fontname="Helvetica", fontsize=9];`)
	for _, g := range out.Groups {
		gid := fmt.Sprintf("g%d", g.Group.ID)
		label := fmt.Sprintf("group %d · step %d\n%s\n%s · %s", g.Group.ID, g.Group.Step, g.Group.Task, g.Group.Status, plural(g.leaves, "leaf", "leaves"))
		if len(g.Advantages) > 0 {
			label += "\n" + baselineText(g)
		}
		fmt.Fprintf(w, "  %s [label=%s, shape=box, style=filled, fillcolor=\"#eeeeee\"];\n", gid, dotQuote(label))
		var walk func(parent string, nodes []treeNode)
		walk = func(parent string, nodes []treeNode) {
			for _, n := range nodes {
				nid := fmt.Sprintf("n%d", n.ID)
				lines := []string{fmt.Sprintf("%d %s", n.ID, statusLabel(n)), plural(n.Turns, "turn", "turns")}
				lines = append(lines, intervalNotes(n)...)
				if n.HasReward {
					leaf := "reward " + fmtNum(n.Reward)
					if n.adv != nil {
						leaf += " · adv " + fmtSigned(n.adv.Advantage)
					}
					lines = append(lines, leaf)
				}
				fmt.Fprintf(w, "  %s [label=%s, fillcolor=%s];\n", nid, dotQuote(strings.Join(lines, "\n")), dotQuote(dotFill(string(n.Status))))
				if n.Depth == 0 {
					fmt.Fprintf(w, "  %s -> %s;\n", parent, nid)
				} else {
					fmt.Fprintf(w, "  %s -> %s [label=%s];\n", parent, nid, dotQuote(fmt.Sprintf("fork@%d", n.Base)))
				}
				walk(nid, n.Children)
			}
		}
		walk(gid, g.Tree)
	}
	fmt.Fprintln(w, "}")
}

// dotQuote makes a DOT double-quoted string; newlines become \n line breaks.
func dotQuote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	return `"` + r.Replace(s) + `"`
}
