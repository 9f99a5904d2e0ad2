package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

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

	// Build the copy in a folder beside its destination and link it into
	// place only when it is complete and verified, so --out is never a
	// half-written file.
	tmpDir, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	tmpPath := filepath.Join(tmpDir, filepath.Base(out))
	// The copy cannot be cancelled: a stop signal removes the temporary
	// copy at once, the copy runs on into the unlinked file, and the
	// command then ends without linking it.
	ctx, stop := onStop(context.Background(), func() { _ = os.RemoveAll(tmpDir) })
	defer stop()
	opts := &store.CompactOptions{FileMode: srcInfo.Mode().Perm()}
	finishBar := func() {}
	if !a.json && a.isTerminal(a.stderr) {
		opts.OnProgress, finishBar = progressBar(a.stderr, "compact")
	}
	err = store.Compact(src, tmpPath, opts)
	finishBar()
	interrupted := fmt.Errorf("compact interrupted: nothing was written to %s", out)
	switch {
	case ctx.Err() != nil:
		return interrupted
	case errors.Is(err, store.ErrCorrupt):
		return a.damaged(err)
	case err != nil:
		return err
	}
	a.pause(ctx, "compact")
	if ctx.Err() != nil {
		return interrupted
	}
	res := compactOutput{Source: a.dbPath, Out: out, SourceBytes: srcInfo.Size(), PageSize: src.PageSize()}
	if err := src.View(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		res.Runs = len(ids)
		return err
	}); err != nil {
		return err
	}
	// A signal from here on removes the copy under the link: it then
	// fails, and the interruption is what to report.
	if err := linkNew(tmpPath, out); err != nil {
		if ctx.Err() != nil {
			return interrupted
		}
		return err
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

// linkNew moves the finished copy to out without ever replacing a file
// that appeared there meanwhile: a hard link fails if out exists (rename
// would silently overwrite). File systems without hard links fall back to a
// checked rename.
func linkNew(tmp, out string) error {
	err := os.Link(tmp, out)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return usageErrorf("%s already exists; compact never overwrites (remove it or choose another --out)", out)
	default:
		if _, serr := os.Lstat(out); serr == nil {
			return usageErrorf("%s already exists; compact never overwrites (remove it or choose another --out)", out)
		}
		if err := os.Rename(tmp, out); err != nil {
			return err
		}
	}
	// Make the new directory entry durable.
	if d, err := os.Open(filepath.Dir(out)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
