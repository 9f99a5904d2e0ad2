package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/store"
)

type restoreFlags struct {
	run string
	out string
	as  string
}

func newRestoreCommand(app *App) *cobra.Command {
	f := &restoreFlags{}
	cmd := &cobra.Command{
		Use:   "restore LAKE --run RUN --out FILE",
		Short: "Rebuild a run from a Parquet lake into a new file a trainer resumes from",
		Long: `restore rebuilds run RUN of the lake at LAKE (a folder or s3://bucket/prefix,
as export --format parquet or serve --lake wrote it) into a new patrdb file
at --out: the run's config, its checkpoints, its rubric pools with their
usage statistics, and every group, node, turn and advantage of the steps the
lake holds, replayed from the lake's event log, then checked as patrdb check
would. A trainer resumes it from the last checkpoint the lake holds, so a
machine lost mid-run costs at most the steps not exported yet; show, tree,
traj, adv and batch read the restored steps as they read the original.

--as NAME gives the run another id in the file. The file is written beside
--out and linked into place only when complete and checked; an existing
--out is never overwritten.`,
		Args: needArgs("LAKE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.restore(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.run, "run", "", "the run's name in the lake (required)")
	fl.StringVar(&f.out, "out", "", "the new file to write (must not exist)")
	fl.StringVar(&f.as, "as", "", "the run's `ID` in the file (default: its name in the lake)")
	_ = cmd.MarkFlagRequired("run")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func (a *App) restore(ctx context.Context, u string, f *restoreFlags) error {
	if _, err := parseRunID(f.run); err != nil {
		return err
	}
	if f.as != "" {
		if _, err := parseRunID(f.as); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(f.out); err == nil {
		return usageErrorf("%s already exists; restore writes a new file and never overwrites one", f.out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	lk, err := a.openLake("LAKE", u)
	if err != nil {
		return err
	}
	tmpDir, err := os.MkdirTemp(filepath.Dir(f.out), "."+filepath.Base(f.out)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, filepath.Base(f.out))
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := onStop(ctx, nil)
	defer stop()
	o := store.DefaultOptions()
	o.Clock = a.now
	db, err := store.Open(tmp, o)
	if err != nil {
		return err
	}
	opts := lake.RestoreOptions{As: f.as}
	finishBar := func() {}
	if !a.json && a.isTerminal(a.stderr) {
		opts.OnProgress, finishBar = progressBar(a.stderr, "restore "+f.run)
	}
	res, err := lk.Restore(ctx, db, f.run, opts)
	finishBar()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return a.lakeError(lk, f.run, err)
	}
	a.pause(ctx, "restore")
	if ctx.Err() != nil {
		return fmt.Errorf("restore interrupted: nothing was written to %s", f.out)
	}
	if err := os.Link(tmp, f.out); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return usageErrorf("%s already exists; restore writes a new file and never overwrites one", f.out)
		}
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	_, err = fmt.Fprintf(a.stdout, "restored run %s from %s into %s: steps through %d, %s, %s; resume it after step %d (its last checkpoint)\n",
		res.Run, res.Lake, f.out, res.Through, plural(res.Events, "event", "events"), plural(res.Turns, "turn", "turns"), res.LastStep)
	return err
}
