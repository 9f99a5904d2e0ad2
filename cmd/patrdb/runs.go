package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/store"
)

func newRunsCommand(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "One row per run: status, steps, groups, nodes, turns, leaves (--bytes: bytes)",
		Long: `runs lists every run in the file: its status, the last completed step, and
how many groups (rollout trees), nodes, stored turns and leaves it holds,
read from the run's counters. --bytes adds the bytes its buckets occupy on
disk, which reads every page of the run.` + remoteHelp,
		Args: needArgs(),
	}
	rf := addRemoteFlags(app, cmd)
	bytes := cmd.Flags().Bool("bytes", false, "add the bytes each run's buckets occupy (reads every page of the file)")
	cmd.RunE = func(*cobra.Command, []string) error { return app.runs(rf, *bytes) }
	return cmd
}

// runsOutput is `runs --json`.
type runsOutput struct {
	Runs []store.RunSummary `json:"runs"`
}

func (a *App) runs(rf *remoteFlags, withBytes bool) error {
	out := runsOutput{Runs: []store.RunSummary{}}
	where := a.dbPath
	err := a.read(rf, func(src source) error {
		where = src.where()
		ids, err := src.RunIDs()
		if err != nil {
			return err
		}
		for _, id := range ids {
			r, err := src.summaryRun(id, withBytes)
			if err != nil {
				return err
			}
			s, err := r.Summary(store.SummaryOptions{Buckets: withBytes})
			if err != nil {
				return err
			}
			out.Runs = append(out.Runs, s)
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
	head := "RUN\tSTATUS\tSTEPS\tGROUPS\tNODES\tTURNS\tLEAVES"
	if withBytes {
		head += "\tBYTES"
	}
	fmt.Fprintln(t, head)
	var walked []string
	for _, r := range out.Runs {
		fmt.Fprintf(t, "%s\t%s\t%d\t%d\t%d\t%d\t%d", r.Run, r.Status, r.LastStep, r.Groups, r.Nodes, r.Turns, r.Leaves)
		if withBytes {
			fmt.Fprintf(t, "\t%d", r.Bytes)
		}
		fmt.Fprintln(t)
		if r.Walked {
			walked = append(walked, r.Run)
		}
	}
	if err := t.Flush(); err != nil {
		return err
	}
	printWalked(w, walked)
	return w.Flush()
}

// printWalked notes the runs whose figures were counted by reading every
// node: they were written before runs kept counters.
func printWalked(w io.Writer, runs []string) {
	switch len(runs) {
	case 0:
		return
	case 1:
		fmt.Fprintf(w, "\nrun %s has", runs[0])
	default:
		fmt.Fprintf(w, "\nruns %s have", strings.Join(runs, ", "))
	}
	fmt.Fprintln(w, " no counters (written by an older patrdb), so every node was read to count them; the next write to the run stores them")
}
