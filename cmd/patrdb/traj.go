package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
)

func newTrajCommand(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "traj RUN NODE",
		Short: "The full trajectory root→node, turn by turn, marking where each inherited prefix ends",
		Long: `traj materialises a node's trajectory: each ancestor's turns up to the point
its child forks, then the node's own. Each turn shows its action, observation
and env reward, its token counts and the mean logprob of the action tokens. A
marker line shows where an inherited prefix ends and the next node's own
turns begin. --json adds the token ids and logprobs.` + remoteHelp,
		Args:              needArgs("RUN", "NODE"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error { return app.traj(rf, args[0], args[1]) }
	return cmd
}

// trajOutput is `traj --json`: the API's trajectory reply (the node, the
// turns it inherits, each path node's share and every turn in path order),
// with the run it belongs to.
type trajOutput struct {
	Run string `json:"run"`
	api.Trajectory
}

func (a *App) traj(rf *remoteFlags, runArg, nodeArg string) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	nodeID, err := parseID("NODE", nodeArg)
	if err != nil {
		return err
	}
	var out trajOutput
	err = a.readRun(rf, id, func(r runReader) error {
		n, err := lookupNode(r, nodeID)
		if err != nil {
			return err
		}
		segs, err := r.Path(nodeID)
		if err != nil {
			return err
		}
		turns, err := r.Trajectory(nodeID)
		if err != nil {
			return err
		}
		out = trajOutput{Run: id, Trajectory: api.Trajectory{Node: n, Inherited: n.Base,
			Segments: nonNil(segs), Turns: nonNil(turns)}}
		return nil
	})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	a.writeTraj(w, out)
	return w.Flush()
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (a *App) writeTraj(w io.Writer, o trajOutput) {
	n := o.Node
	head := fmt.Sprintf("run %s · node %d · group %d · step %d · %s · %s",
		o.Run, n.ID, n.Group, n.Step, a.paint(statusColor(string(n.Status)), string(n.Status)), plural(n.PathLen(), "turn", "turns"))
	if n.Base > 0 {
		head += fmt.Sprintf(" (%d inherited)", n.Base)
	}
	if n.HasReward {
		head += " · reward " + fmtNum(n.Reward)
	}
	fmt.Fprintln(w, head)
	path := make([]string, len(o.Segments))
	from := 0
	for i, s := range o.Segments {
		path[i] = fmt.Sprintf("node %d %s", s.Node, turnRange(from, s.Count))
		from += s.Count
	}
	fmt.Fprintf(w, "path: %s\n", strings.Join(path, " → "))

	t, from := 0, 0
	for i, s := range o.Segments {
		if i > 0 {
			prev := o.Segments[i-1].Node
			fmt.Fprintln(w, a.paint(ansiDim, fmt.Sprintf("──── prefix from node %d ends at turn %d · node %d's own turns begin ────", prev, from, s.Node)))
		}
		for from += s.Count; t < len(o.Turns) && t < from; t++ {
			writeTurn(w, t, o.Turns[t])
		}
	}
}

// turnRange names the path turns a segment covers: "turns 0-4", "turn 5",
// or "no turns".
func turnRange(from, count int) string {
	switch count {
	case 0:
		return "no turns"
	case 1:
		return fmt.Sprintf("turn %d", from)
	}
	return fmt.Sprintf("turns %d-%d", from, from+count-1)
}

// writeTurn prints the turn at path position pos.
func writeTurn(w io.Writer, pos int, t model.PathTurn) {
	head := fmt.Sprintf("turn %d · node %d #%d · reward %s · action %s", pos, t.Node, t.Index, fmtNum(t.Reward),
		plural(len(t.ActionTokens), "token", "tokens"))
	if len(t.ActionLogprobs) > 0 {
		sum := 0.0
		for _, lp := range t.ActionLogprobs {
			sum += float64(lp)
		}
		head += ", mean logprob " + fmtNum(sum/float64(len(t.ActionLogprobs)))
	}
	head += " · observation " + plural(len(t.ObservationTokens), "token", "tokens")
	if t.Done {
		head += " · done"
	}
	fmt.Fprintln(w, head)
	writeField(w, "action", t.Action)
	writeField(w, "observation", t.Observation)
}

// writeField prints a labelled, possibly multi-line text with continuation
// lines aligned under the first.
func writeField(w io.Writer, label, text string) {
	const indent = "    "
	pad := strings.Repeat(" ", len("observation")-len(label))
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	fmt.Fprintf(w, "%s%s%s  %s\n", indent, label, pad, lines[0])
	for _, l := range lines[1:] {
		fmt.Fprintf(w, "%s%s  %s\n", indent, strings.Repeat(" ", len("observation")), l)
	}
}
