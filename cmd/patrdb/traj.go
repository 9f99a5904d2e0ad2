package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
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

// trajOutput is `traj --json`.
type trajOutput struct {
	Run       string        `json:"run"`
	Node      uint64        `json:"node"`
	Group     uint64        `json:"group"`
	Step      uint64        `json:"step"`
	Status    string        `json:"status"`
	ForkTurn  int           `json:"fork_turn"`  // turns inherited from ancestors
	PathTurns int           `json:"path_turns"` // all turns, inherited and own
	Reward    *float64      `json:"reward"`
	Segments  []segmentJSON `json:"segments"`
	Turns     []trajTurn    `json:"turns"`
}

// segmentJSON is one node's contribution to the trajectory: its own turns
// 0..count-1, placed from path turn from_turn on.
type segmentJSON struct {
	Node     uint64 `json:"node"`
	Count    int    `json:"count"`
	FromTurn int    `json:"from_turn"`
}

type trajTurn struct {
	Turn              int       `json:"turn"`  // position in the trajectory, from 0
	Node              uint64    `json:"node"`  // the node that stores it
	Index             int       `json:"index"` // its index among that node's own turns
	Inherited         bool      `json:"inherited"`
	Action            string    `json:"action"`
	ActionTokens      []uint32  `json:"action_tokens"`
	ActionLogprobs    []float32 `json:"action_logprobs"`
	Observation       string    `json:"observation"`
	ObservationTokens []uint32  `json:"observation_tokens"`
	Reward            float64   `json:"reward"`
	Done              bool      `json:"done"`
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
		out = trajOutput{Run: id, Node: n.ID, Group: n.Group, Step: n.Step, Status: string(n.Status),
			ForkTurn: n.Base, PathTurns: n.PathLen(), Segments: []segmentJSON{}, Turns: []trajTurn{}}
		if n.HasReward {
			rw := n.Reward
			out.Reward = &rw
		}
		from := 0
		for _, s := range segs {
			out.Segments = append(out.Segments, segmentJSON{Node: s.Node, Count: s.Count, FromTurn: from})
			from += s.Count
		}
		for i, t := range turns {
			out.Turns = append(out.Turns, trajTurn{
				Turn: i, Node: t.Node, Index: t.Index, Inherited: t.Node != nodeID,
				Action: t.Action, ActionTokens: nonNil(t.ActionTokens), ActionLogprobs: nonNil(t.ActionLogprobs),
				Observation: t.Observation, ObservationTokens: nonNil(t.ObservationTokens),
				Reward: t.Reward, Done: t.Done,
			})
		}
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
	head := fmt.Sprintf("run %s · node %d · group %d · step %d · %s · %s",
		o.Run, o.Node, o.Group, o.Step, a.paint(statusColor(o.Status), o.Status), plural(o.PathTurns, "turn", "turns"))
	if o.ForkTurn > 0 {
		head += fmt.Sprintf(" (%d inherited)", o.ForkTurn)
	}
	if o.Reward != nil {
		head += " · reward " + fmtNum(*o.Reward)
	}
	fmt.Fprintln(w, head)
	path := make([]string, len(o.Segments))
	for i, s := range o.Segments {
		path[i] = fmt.Sprintf("node %d %s", s.Node, turnRange(s.FromTurn, s.Count))
	}
	fmt.Fprintf(w, "path: %s\n", strings.Join(path, " → "))

	t := 0
	for i, s := range o.Segments {
		if i > 0 {
			prev := o.Segments[i-1].Node
			fmt.Fprintln(w, a.paint(ansiDim, fmt.Sprintf("──── prefix from node %d ends at turn %d · node %d's own turns begin ────", prev, s.FromTurn, s.Node)))
		}
		for ; t < len(o.Turns) && t < s.FromTurn+s.Count; t++ {
			writeTurn(w, o.Turns[t])
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

func writeTurn(w io.Writer, t trajTurn) {
	head := fmt.Sprintf("turn %d · node %d #%d · reward %s · action %s", t.Turn, t.Node, t.Index, fmtNum(t.Reward),
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
