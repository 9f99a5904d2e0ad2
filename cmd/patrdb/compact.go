package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/internal/publish"
	"github.com/patrdb/patrdb/store"
)

func newCompactCommand(app *App) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "compact --out PATH",
		Short: "Write a compacted copy of the file (never overwrites)",
		Long: `compact copies every bucket, key and sequence of the file into a new file
at --out, packed full and created with the source's page size (store.Compact),
then checks that the copy opens as a patrdb file with the same runs.
The source is opened read-only and is not modified. An existing --out is
never overwritten; the copy appears at --out only once it is complete.`,
		Args: needArgs(),
		RunE: func(*cobra.Command, []string) error { return app.compact(out) },
	}
	cmd.Flags().StringVar(&out, "out", "", "the new file to write (must not exist)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// compactOutput is `compact --json`.
type compactOutput struct {
	Source      string `json:"source"`
	Out         string `json:"out"`
	SourceBytes int64  `json:"source_bytes"`
	OutBytes    int64  `json:"out_bytes"`
	PageSize    int    `json:"page_size"`
	Runs        int    `json:"runs"`
}

func (a *App) compact(out string) error {
	if out == "" {
		return usageErrorf("--out is empty")
	}
	if _, err := os.Lstat(out); err == nil {
		return usageErrorf("%s already exists; compact never overwrites (remove it or choose another --out)", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	src, err := a.openRead()
	if err != nil {
		return err
	}
	defer src.Close()
	srcInfo, err := os.Stat(a.dbPath)
	if err != nil {
		return err
	}

	// The copy is built under a temporary name beside --out and renamed
	// into place only when it is complete and verified, so --out is never
	// a half-written file; a stop signal removes it and stops the copy.
	g, ctx := publish.Watch(context.Background())
	defer g.Close()
	o, err := g.Begin(out)
	if err != nil {
		return published(ctx, err, "compact", out, "--out")
	}
	defer o.Abort()
	opts := &store.CompactOptions{FileMode: srcInfo.Mode().Perm(), Context: ctx}
	finishBar := func() {}
	if !a.json && a.isTerminal(a.stderr) {
		opts.OnProgress, finishBar = progressBar(a.stderr, "compact")
	}
	err = store.Compact(src, o.Path(), opts)
	finishBar()
	switch {
	case ctx.Err() != nil:
		return interrupted("compact", out)
	case errors.Is(err, store.ErrCorrupt):
		return a.damaged(err)
	case err != nil:
		return err
	}
	a.pause(ctx, "compact")
	if ctx.Err() != nil {
		return interrupted("compact", out)
	}
	res := compactOutput{Source: a.dbPath, Out: out, SourceBytes: srcInfo.Size(), PageSize: src.PageSize()}
	if err := src.View(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		res.Runs = len(ids)
		return err
	}); err != nil {
		return err
	}
	if err := o.Publish(false); err != nil {
		return published(ctx, err, "compact", out, "--out")
	}
	if fi, err := os.Stat(out); err == nil {
		res.OutBytes = fi.Size()
	}
	if a.json {
		return a.printJSON(res)
	}
	pct := 0.0
	if res.SourceBytes > 0 {
		pct = 100 * float64(res.OutBytes) / float64(res.SourceBytes)
	}
	_, err = fmt.Fprintf(a.stdout, "compacted %s (%s) into %s (%s, %.0f%% of the original), page size %d, %s\n",
		res.Source, fmtBytes(res.SourceBytes), res.Out, fmtBytes(res.OutBytes), pct, res.PageSize, plural(res.Runs, "run", "runs"))
	return err
}
