package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/internal/publish"
	"github.com/patrdb/patrdb/store"
)

func newBackupCommand(app *App) *cobra.Command {
	var out string
	var rf *remoteFlags
	cmd := &cobra.Command{
		Use:   "backup --out PATH",
		Short: "Write a consistent copy of the file while it is written (never overwrites)",
		Long: `backup writes a copy of the whole file as one commit left it (bbolt's
Tx.WriteTo) into a new file at --out: a consistent snapshot, taken while
writers go on. Copying the file with cp while a trainer or patrdb serve
writes it is not: it may catch a commit half-written.

While patrdb serve (or a trainer serving in-process) holds the file, the
copy comes through that server (GET /api/v1/backup; --server URL names it,
else the address the owner wrote next to the file is used). The copy is
written beside --out and renamed into place only when complete and opening
as a patrdb file; an existing --out is never overwritten. An interrupt
removes the partial copy.`,
		Args: needArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return app.backup(cmd.Context(), out, rf) },
	}
	cmd.Flags().StringVar(&out, "out", "", "the new file to write (must not exist)")
	_ = cmd.MarkFlagRequired("out")
	rf = addRemoteFlags(app, cmd)
	return cmd
}

// backupOutput is `backup --json`.
type backupOutput struct {
	Source string `json:"source"` // the file, or the server it came through
	Out    string `json:"out"`
	Bytes  int64  `json:"bytes"`
	Runs   int    `json:"runs"`
}

func (a *App) backup(ctx context.Context, out string, rf *remoteFlags) error {
	if out == "" {
		return usageErrorf("--out is empty")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	// The copy is built under a temporary name beside --out and renamed
	// into place only when it is complete and opens as a patrdb file; a
	// stop signal removes it.
	g, ctx := publish.Watch(ctx)
	defer g.Close()
	o, err := g.Begin(out)
	if err != nil {
		return published(ctx, err, "backup", out, "--out")
	}
	defer o.Abort()
	tmp := o.Path()

	res := backupOutput{Source: a.dbPath, Out: out}
	cl, err := a.remote(ctx, rf)
	if err != nil {
		return err
	}
	if cl != nil {
		res.Source = cl.Base
		f, err := o.Create(0o644)
		if err != nil {
			return err
		}
		_, err = cl.Backup(ctx, f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if ctx.Err() != nil {
			return interrupted("backup", out)
		}
		if err != nil {
			return a.remoteError(cl, err)
		}
	} else {
		db, err := a.openRead()
		if err != nil {
			return err
		}
		_, err = db.BackupFile(tmp)
		db.Close()
		if ctx.Err() != nil {
			return interrupted("backup", out)
		}
		if err != nil {
			return err
		}
	}
	a.pause(ctx, "backup")
	if ctx.Err() != nil {
		return interrupted("backup", out)
	}
	// The copy must open as a patrdb file: a copy cut short does not.
	so := store.DefaultOptions()
	so.ReadOnly, so.Timeout = true, a.timeout
	cp, err := store.Open(tmp, so)
	if err != nil {
		return fmt.Errorf("the copy does not open (%v): nothing was written to %s", err, out)
	}
	err = cp.View(func(tx *store.Tx) error {
		ids, err := tx.RunIDs()
		res.Runs = len(ids)
		return err
	})
	cp.Close()
	if err != nil {
		return err
	}
	if err := o.Publish(false); err != nil {
		return published(ctx, err, "backup", out, "--out")
	}
	if fi, err := os.Stat(out); err == nil {
		res.Bytes = fi.Size()
	}
	if a.json {
		return a.printJSON(res)
	}
	_, err = fmt.Fprintf(a.stdout, "backed up %s into %s: %s, %s, as one commit left it\n", res.Source, res.Out, fmtBytes(res.Bytes), plural(res.Runs, "run", "runs"))
	return err
}
