package main

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
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
	Runs []runRow `json:"runs"`
}

// runRow is one run of `runs --json`: its summary, or, for a run that is
// damaged where its summary reads, its id and why (the API's run list
// says it the same way).
type runRow struct {
	model.RunSummary
	Damaged string `json:"damaged,omitempty"`
}

// runs lists every run, a damaged one marked as such (listRuns).
func (a *App) runs(rf *remoteFlags, withBytes bool) error {
	var out runsOutput
	var listed error
	where := a.dbPath
	err := a.read(rf, func(src source) error {
		where = src.where()
		ids, err := src.RunIDs()
		if err != nil {
			return err
		}
		out.Runs, listed, err = listRuns(a, src, ids,
			func(r runReader) (runRow, error) {
				s, err := r.Summary(model.SummaryOptions{Buckets: withBytes})
				return runRow{RunSummary: s}, err
			},
			func(id, why string) runRow { return runRow{RunSummary: model.RunSummary{Run: id}, Damaged: why} })
		return err
	})
	if err != nil {
		return err
	}
	if a.json {
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else if err := a.printRuns(out, where, withBytes); err != nil {
		return err
	}
	return listed
}

// listRuns reads a row for each of ids with read. A damaged run is that
// run's problem: its row is mark's, naming why, and the others are read
// as usual; listed then names the damage (exit 2), so exit 0 means every
// row is whole. err is any other failure, which ends the list.
func listRuns[T any](a *App, src source, ids []string, read func(runReader) (T, error), mark func(id, why string) T) (rows []T, listed, err error) {
	rows = make([]T, 0, len(ids))
	var damaged []error
	for _, id := range ids {
		r, err := src.Run(id)
		var row T
		if err == nil {
			row, err = read(r)
		}
		if errors.Is(err, store.ErrCorrupt) {
			err = a.damaged(err)
			damaged = append(damaged, err)
			rows = append(rows, mark(id, errorText(err)))
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
	}
	if len(damaged) > 1 {
		return rows, a.damagedRuns(len(damaged), len(rows), src.where()), nil
	}
	return rows, errors.Join(damaged...), nil
}

// damagedRuns is the one line for several damaged runs (each is named in
// its row).
func (a *App) damagedRuns(n, of int, where string) error {
	return &codeError{exitUsage, &damagedError{fmt.Sprintf("%d of the %d runs in %s are damaged (marked in the list): run patrdb check --db %s to list the damage", n, of, where, a.dbPath)}}
}

// printRuns is the table of `runs`.
func (a *App) printRuns(out runsOutput, where string, withBytes bool) error {
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
		if r.Damaged != "" {
			fmt.Fprintf(t, "%s\tdamaged\t-\t-\t-\t-\t-", r.Run)
			if withBytes {
				fmt.Fprint(t, "\t-")
			}
			fmt.Fprintln(t)
			continue
		}
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
