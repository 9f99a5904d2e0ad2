package main

import (
	"bufio"
	"fmt"

	"github.com/patrdb/patrdb/model"
	"github.com/spf13/cobra"
)

func newFrontierCommand(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "frontier RUN",
		Short: "The active nodes a resume would continue, with group, depth and last score",
		Long: `frontier lists the run's active nodes — exactly what a resume after a crash
continues from — with their step, group, depth, turns and last process score.` + remoteHelp,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error { return app.frontier(rf, args[0]) }
	return cmd
}

// frontierOutput is `frontier --json`: the active nodes as the store and
// the API hold them.
type frontierOutput struct {
	Run   string       `json:"run"`
	Nodes []model.Node `json:"nodes"`
}

func (a *App) frontier(rf *remoteFlags, runArg string) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	out := frontierOutput{Run: id}
	err = a.readRun(rf, id, func(r runReader) error {
		nodes, err := r.FrontierNodes()
		out.Nodes = nonNil(nodes)
		return err
	})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	if len(out.Nodes) == 0 {
		fmt.Fprintf(w, "run %s has no active nodes: nothing to resume\n", id)
		return w.Flush()
	}
	t := newTable(w)
	fmt.Fprintln(t, "NODE\tSTEP\tGROUP\tPARENT\tDEPTH\tTURNS\tPATH TURNS\tLAST SCORE\tATTEMPT")
	for _, n := range out.Nodes {
		score := "-"
		if last, ok := lastScore(n); ok {
			score = fmt.Sprintf("%s (i%d)", fmtScore(last.Value), last.Interval)
		}
		parent := "-"
		if n.Parent != 0 {
			parent = fmt.Sprint(n.Parent)
		}
		fmt.Fprintf(t, "%d\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%d\n", n.ID, n.Step, n.Group, parent, n.Depth, n.Turns, n.PathLen(), score, n.Attempt)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s to resume\n", plural(len(out.Nodes), "active node", "active nodes"))
	return w.Flush()
}

// lastScore is the score of the latest interval a node was scored at.
func lastScore(n model.Node) (model.Score, bool) {
	var best model.Score
	found := false
	for _, s := range n.Scores {
		if !found || s.Interval >= best.Interval {
			best, found = s, true
		}
	}
	return best, found
}
