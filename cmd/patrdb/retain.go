package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/store"
)

type retainFlags struct {
	keep    uint64
	lakeURL string
	as      string
}

func newRetainCommand(app *App) *cobra.Command {
	f := &retainFlags{}
	cmd := &cobra.Command{
		Use:   "retain RUN --keep-steps N --lake URL",
		Short: "Drop from the file the old steps the lake holds, keeping the last N",
		Long: `retain deletes from the file the steps of RUN that are checkpointed, in the
lake at --lake (a folder or s3://bucket/prefix, as export --format parquet
wrote it) and older than the run's last --keep-steps checkpointed steps:
their groups, nodes, turns, advantages and checkpoints, and the events only
they needed. bbolt reuses their pages, so a run that keeps N steps stops
growing the file. The lake keeps every step (patrdb restore brings them
back); check stays clean, and a trainer resumes from the last checkpoint as
before. The drop is on record: the run record says how far
(dropped_step), and a run.drop event says when.

Steps the lake does not hold yet stay, and are listed. patrdb serve --lake
URL --keep-steps N does this after every export; this command needs the
file itself (stop the server first).`,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.retain(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&f.keep, "keep-steps", 0, "how many of the last checkpointed steps stay in the file, at least 1 (required)")
	fl.StringVar(&f.lakeURL, "lake", "", "the lake the run is exported into (required)")
	fl.StringVar(&f.as, "as", "", "the run's `NAME` in the lake, when exported under another name")
	return cmd
}

func (a *App) retain(ctx context.Context, runArg string, f *retainFlags) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	switch {
	case f.keep == 0:
		return usageErrorf("retain needs --keep-steps N, at least 1 (the last checkpoint, which a resume needs)")
	case f.lakeURL == "":
		return usageErrorf("retain needs --lake URL: only steps the lake holds are dropped")
	}
	lk, err := a.openLake("--lake", f.lakeURL)
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := onStop(ctx, nil)
	defer stop()
	db, err := a.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.View(func(tx *store.Tx) error { _, err := a.lookupRun(tx, id, store.CheckSummary); return err }); err != nil {
		return err
	}
	res, err := lk.Retain(ctx, db, id, lake.RetainOptions{KeepSteps: f.keep, As: f.as})
	if err != nil {
		return a.lakeError(lk, nameOr(f.as, id), err)
	}
	if a.json {
		return a.printJSON(res)
	}
	d := res.Dropped
	switch {
	case d.Groups+d.Checkpoints == 0 && res.Through == 0:
		fmt.Fprintf(a.stdout, "run %s keeps every step: none is older than the last %d checkpointed and in the lake\n", id, f.keep)
	case d.Groups+d.Checkpoints == 0:
		fmt.Fprintf(a.stdout, "run %s is dropped through step %d already: nothing more to drop\n", id, res.Through)
	default:
		fmt.Fprintf(a.stdout, "dropped run %s through step %d: %s, %s, %s, %s; the lake %s keeps them\n", id, res.Through,
			plural(d.Groups, "group", "groups"), plural(d.Nodes, "node", "nodes"), plural(d.Turns, "turn", "turns"),
			plural(d.Events, "event", "events"), lk)
	}
	if n := len(res.Waiting); n > 0 {
		fmt.Fprintf(a.stdout, "kept %s the lake does not hold yet: export the run, then retain again\n", plural(n, "old step", "old steps"))
	}
	return nil
}

func nameOr(as, id string) string {
	if as != "" {
		return as
	}
	return id
}
