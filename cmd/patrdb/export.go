package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/replay/export"
	"github.com/patrdb/patrdb/store"
)

type exportFlags struct {
	format  string
	out     string
	force   bool
	as      string
	replace bool
	rf      *remoteFlags
}

func newExportCommand(app *App) *cobra.Command {
	f := &exportFlags{}
	cmd := &cobra.Command{
		Use:   "export RUN --format parquet|jsonl|rl --out LAKE|DIR",
		Short: "Add a run to a Parquet lake (a folder or s3://bucket/prefix), or write it as JSONL or RL rows",
		Long: `export writes a run for analysis tools:

  parquet  adds the run to a lake: a folder, or s3://bucket/prefix (the
           endpoint, region and credentials come from AWS_ENDPOINT_URL,
           AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the
           shared credentials file). One folder per table,
           LAKE/<table>/run=<name>/step=<n>/part-<k>.parquet, for the tables
           runs, groups, checkpoints, nodes, turns, advantages, rubrics and
           events (docs/lake.md lists their columns, with DuckDB and pandas
           recipes). A step joins the lake once the run has checkpointed it,
           with its part of the event log; a finished or failed run joins
           whole. Exporting again adds what is new, so export as often as you
           like; patrdb serve --lake exports each step as it is checkpointed.
           The lake holds one run under a name: a run from another file under
           the same name is refused (the lake stays as it was); --as NAME
           exports under another name, --replace replaces the lake's run
           whole, never mixing the two.
  jsonl    DIR/run=<id>/step=<n>/trajectories.jsonl: one line per leaf with
           its whole path materialised (task, prompt and its tokens, reward,
           advantage, every turn with its token ids, logprobs and policy
           version); nodes.jsonl: one line per node with its parent and fork
           point. Both carry the columns the parquet lake keeps of the same
           records, under the same names.
  rl       DIR/run=<id>/step=<n>/rl.jsonl and rl.parquet, the same rows in
           both: one per leaf of the step's closed groups with its training
           sequence as patrdb batch builds it (input_ids, loss_mask,
           old_logprobs, advantages, positions), group, leaf, status, reward
           and advantage (floats).

Files are written under a temporary name (in the lake, a hidden
.export.partial-* folder) and published only when complete, so an error
or an interrupt (Ctrl-C, SIGTERM, SIGHUP) leaves no partial file behind;
the next export removes what a killed one left. For jsonl and rl a DIR that exists and is
not empty is refused unless --force, which replaces only DIR/run=<id>. A
progress bar is drawn on stderr when it is a terminal.

While patrdb serve (or a trainer serving in-process) holds the file, export
reads a consistent copy of it through that server (GET /api/v1/backup; --server
URL names it, else the address the owner wrote next to the file is used).`,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.export(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "", "parquet, jsonl or rl (required)")
	fl.StringVar(&f.out, "out", "", "the lake (a folder or s3://bucket/prefix), or the folder to write run=<id>/step=<n>/ into (required)")
	fl.BoolVar(&f.force, "force", false, "jsonl, rl: write into a non-empty DIR, replacing DIR/run=<id>")
	fl.StringVar(&f.as, "as", "", "parquet: the run's `NAME` in the lake (default: its id in the file)")
	fl.BoolVar(&f.replace, "replace", false, "parquet: replace whatever the lake holds under the name, all of it")
	f.rf = addRemoteFlags(app, cmd)
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"parquet", "jsonl", "rl"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (a *App) export(ctx context.Context, runArg string, f *exportFlags) (err error) {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	switch {
	case f.format == "":
		return usageErrorf("export needs --format parquet, jsonl or rl")
	case f.out == "":
		return usageErrorf("export needs --out LAKE or DIR")
	case f.format == "parquet":
		if f.force {
			return usageErrorf("--force is for jsonl and rl; into a lake, use --as NAME for another name, or --replace to replace the lake's run whole")
		}
		return a.exportLake(ctx, id, f)
	case f.as != "" || f.replace:
		return usageErrorf("--as and --replace are for --format parquet; for jsonl and rl, --force replaces DIR/run=<id>")
	}
	opts := export.ExportOptions{Out: f.out, Format: export.Format(f.format), Force: f.force}
	if err := opts.Validate(); err != nil {
		return usageErrorf("--format %q: want parquet, jsonl or rl", f.format)
	}
	finishBar := func() {}
	if !a.json && a.isTerminal(a.stderr) {
		opts.OnProgress, finishBar = progressBar(a.stderr, "export "+id)
	}
	// A stop signal cancels the export, which then removes its temporary
	// folder instead of leaving half a step behind.
	ctx, stop := onStop(ctx, nil)
	defer stop()
	db, done, err := a.openSnapshot(ctx, f.rf)
	if err != nil {
		return err
	}
	defer done()
	made, err := makeDirs(f.out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && made != "" {
			os.RemoveAll(made) // only folders this export created, so a failure leaves no trace
		}
	}()
	opts.OnProgress = a.pauseAtFirst(ctx, "export", opts.OnProgress)
	var res *export.ExportResult
	err = db.View(func(tx *store.Tx) error {
		r, err := a.lookupRun(tx, id, store.CheckPages)
		if err != nil {
			return err
		}
		res, err = export.Export(ctx, r, opts)
		return err
	})
	finishBar()
	switch {
	case errors.Is(err, export.ErrOutExists):
		return usageErrorf("--out %s exists and is not empty: use --force to replace run=%s inside it", f.out, id)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("export interrupted: nothing was written to %s", f.out)
	case err != nil:
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	w := bufio.NewWriter(a.stdout)
	steps := map[uint64]bool{}
	for _, ef := range res.Files {
		steps[ef.Step] = true
	}
	fmt.Fprintf(w, "exported run %s as %s to %s: %s in %s, %s\n", res.Run, res.Format, res.Dir,
		plural(len(res.Files), "file", "files"), plural(len(steps), "step folder", "step folders"), fmtBytes(res.Bytes))
	if len(res.Files) > 0 {
		printRows(w, res.Rows, []string{"trajectories", "nodes", "rl.jsonl", "rl.parquet"})
	}
	return w.Flush()
}

// printRows prints the rows per table, in order.
func printRows(w io.Writer, rows map[string]int64, order []string) {
	t := newTable(w)
	fmt.Fprintln(t, "TABLE\tROWS")
	for _, table := range order {
		if n, ok := rows[table]; ok {
			fmt.Fprintf(t, "%s\t%d\n", table, n)
		}
	}
	t.Flush()
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
