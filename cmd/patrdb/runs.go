package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/store"
)

func newRunsCommand(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "One row per run: status, steps, groups, nodes, turns, leaves, bytes",
		Long: `runs lists every run in the file: its status, the last completed step,
how many groups (rollout trees), nodes, stored turns and leaves it holds, and
the bytes its buckets occupy on disk.` + remoteHelp,
		Args: needArgs(),
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(*cobra.Command, []string) error { return app.runs(rf) }
	return cmd
}

// runRow is one run in `runs --json`.
type runRow struct {
	Run    string `json:"run"`
	Status string `json:"status"`
	Steps  uint64 `json:"steps"` // last completed step
	Groups int    `json:"groups"`
	Nodes  int    `json:"nodes"`
	Turns  int    `json:"turns"` // turns stored (each once, however many trajectories share it)
	Leaves int    `json:"leaves"`
	Bytes  int64  `json:"bytes"` // sum of the run's bucket sizes
}

type runsOutput struct {
	Runs []runRow `json:"runs"`
}

func (a *App) runs(rf *remoteFlags) error {
	out := runsOutput{Runs: []runRow{}}
	where := a.dbPath
	err := a.read(rf, func(src source) error {
		where = src.where()
		ids, err := src.RunIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, err := src.Run(id)
			if err != nil {
				return err
			}
			s, err := r.summary()
			if err != nil {
				return err
			}
			out.Runs = append(out.Runs, runRow{
				Run: id, Status: string(s.info.Status), Steps: s.info.LastStep,
				Groups: s.groups, Nodes: s.nodes, Turns: s.turns, Leaves: s.leaves, Bytes: s.bytes,
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
	if len(out.Runs) == 0 {
		fmt.Fprintf(w, "no runs in %s\n", where)
		return w.Flush()
	}
	t := newTable(w)
	fmt.Fprintln(t, "RUN\tSTATUS\tSTEPS\tGROUPS\tNODES\tTURNS\tLEAVES\tBYTES")
	for _, r := range out.Runs {
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", r.Run, r.Status, r.Steps, r.Groups, r.Nodes, r.Turns, r.Leaves, r.Bytes)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	return w.Flush()
}

// runSummary is what runs and show report about one run.
type runSummary struct {
	info       store.Run
	groups     int
	openGroups int
	nodes      int // node records stored
	turns      int // turn records stored
	leaves     int
	byStatus   map[store.NodeStatus]int
	events     uint64
	bytes      int64 // sum of the run's bucket sizes
	sizes      []store.BucketSize
}

// summarize reads a run's record, its bucket sizes and every node's status.
// It visits each group's nodes once (through the node cache), so it costs
// time proportional to the run's node count, not its turns.
func summarize(r *store.RunTx) (runSummary, error) {
	s := runSummary{byStatus: map[store.NodeStatus]int{}}
	var err error
	if s.info, err = r.Info(); err != nil {
		return s, err
	}
	if s.sizes, err = r.BucketSizes(); err != nil {
		return s, err
	}
	for _, b := range s.sizes {
		s.bytes += b.Bytes
		switch b.Name {
		case "nodes":
			s.nodes = b.Keys
		case "turns":
			s.turns = b.Keys
		}
	}
	err = r.ForEachGroup(0, func(g store.Group) error {
		s.groups++
		if g.Status == store.GroupOpen {
			s.openGroups++
		}
		nodes, err := r.GroupNodes(g)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			s.byStatus[n.Status]++
			if n.Status.Leaf() {
				s.leaves++
			}
		}
		return nil
	})
	s.events = r.LastSeq()
	return s, err
}
