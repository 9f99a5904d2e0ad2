package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/store"
)

type exportFlags struct {
	format string
	out    string
	force  bool
}

func newExportCommand(app *App) *cobra.Command {
	f := &exportFlags{}
	cmd := &cobra.Command{
		Use:   "export RUN --format jsonl|parquet|rl --out DIR",
		Short: "Write a run as JSONL, Parquet or RL training rows in Hive-style run=/step= folders",
		Long: `export writes a run under DIR/run=<id>/step=<n>/ for analysis tools:

  jsonl    trajectories.jsonl: one line per leaf with its whole path
           materialised (task, prompt, reward, advantage, every turn with its
           token ids and logprobs), for tools that want flat rollouts;
           nodes.jsonl: one line per node with its parent and fork point.
  parquet  nodes, turns, advantages, rubrics and events tables, typed
           columns (token ids list<int32>, logprobs list<float32>, zstd),
           readable by DuckDB, Spark and pandas; run and step come from the
           folder names (hive partitioning), as those engines expect.
  rl       rl.jsonl and rl.parquet, the same rows in both: one per leaf of
           the step's closed groups with its training sequence as patrdb
           batch builds it (input_ids, loss_mask, old_logprobs, advantages,
           positions), group, leaf, status, reward and advantage (floats).

The export is written into a hidden folder beside DIR and renamed into place
when complete, so an error or an interrupt leaves nothing behind. A DIR that
exists and is not empty is refused unless --force, which replaces only
DIR/run=<id> (other runs exported there stay: DIR can be a data lake). A
progress bar is drawn on stderr when it is a terminal.

export reads the file itself (every turn of every leaf), not a server: while
a trainer or patrdb serve owns the file, export a copy of it, or wait until
the owner stops.`,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.export(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "", "jsonl, parquet or rl (required)")
	fl.StringVar(&f.out, "out", "", "the folder to write run=<id>/step=<n>/ into (`DIR`, required)")
	fl.BoolVar(&f.force, "force", false, "write into a non-empty DIR, replacing DIR/run=<id>")
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"jsonl", "parquet", "rl"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *App) export(ctx context.Context, runArg string, f *exportFlags) (err error) {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	opts := replay.ExportOptions{Out: f.out, Format: replay.Format(f.format), Force: f.force}
	switch {
	case f.format == "":
		return usageErrorf("export needs --format jsonl, parquet or rl")
	case f.out == "":
		return usageErrorf("export needs --out DIR")
	}
	if err := opts.Validate(); err != nil {
		return usageErrorf("--format %q: want jsonl, parquet or rl", f.format)
	}
	finishBar := func() {}
	if !a.json && a.isTerminal(a.stderr) {
		opts.OnProgress, finishBar = progressBar(a.stderr, "export "+id)
	}
	db, err := a.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	made, err := makeDirs(f.out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && made != "" {
			os.RemoveAll(made) // only folders this export created, so a failure leaves no trace
		}
	}()
	// A stop signal cancels the export, which then removes its temporary
	// folder instead of leaving half a partition behind.
	ctx, stop := onStop(ctx, nil)
	defer stop()
	if a.pausePoint != nil {
		paused := false
		opts.OnProgress = both(opts.OnProgress, func(int64, int64) {
			if !paused {
				paused = true
				a.pause(ctx, "export")
			}
		})
	}
	var res *replay.ExportResult
	err = db.View(func(tx *store.Tx) error {
		r, err := a.lookupRun(tx, id)
		if err != nil {
			return err
		}
		res, err = replay.Export(ctx, r, opts)
		return err
	})
	finishBar()
	switch {
	case errors.Is(err, replay.ErrOutExists):
		return usageErrorf("--out %s exists and is not empty: use --force to replace run=%s inside it", f.out, id)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("export interrupted: nothing was written to %s", f.out)
	case err != nil:
		return err
	}
	out := res
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	steps := map[uint64]bool{}
	for _, ef := range out.Files {
		steps[ef.Step] = true
	}
	fmt.Fprintf(w, "exported run %s as %s to %s: %s in %s, %s\n", out.Run, out.Format, out.Dir,
		plural(len(out.Files), "file", "files"), plural(len(steps), "step folder", "step folders"), fmtBytes(out.Bytes))
	t := newTable(w)
	fmt.Fprintln(t, "TABLE\tROWS")
	for _, table := range []string{"trajectories", "nodes", "turns", "advantages", "rubrics", "events", "rl.jsonl", "rl.parquet"} {
		if n, ok := out.Rows[table]; ok {
			fmt.Fprintf(t, "%s\t%d\n", table, n)
		}
	}
	t.Flush()
	return w.Flush()
}

// makeDirs creates dir and any missing parents, and returns the topmost
// folder it created ("" when dir existed).
func makeDirs(dir string) (string, error) {
	top := ""
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		top = d
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--out %s: %w", dir, err)
	}
	return top, nil
}
