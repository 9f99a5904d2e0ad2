package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/store"
)

// The lake's commands share how they open a lake and word its refusals.

// openLake opens the lake at u (--out, --lake or restore's URL), with the
// CLI's environment.
func (a *App) openLake(flag, u string) (*lake.Lake, error) {
	lk, err := lake.Open(u, &lake.Options{Getenv: a.getenv})
	if err != nil {
		return nil, usageErrorf("%s %s: %v", flag, u, err)
	}
	return lk, nil
}

// lakeError words the lake's refusals for the CLI, each with its way out.
func (a *App) lakeError(lk *lake.Lake, run string, err error) error {
	var conflict *lake.RunConflictError
	var busy *lake.BusyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &conflict) && conflict.Have.CreatedAt != 0:
		return usageErrorf("%s holds a run %s from another file (run %q created %s; this is run %q created %s): nothing was written; export under another name with --as NAME, or replace the lake's run whole with --replace",
			lk, conflict.Run, conflict.Have.Run, fmtTime(conflict.Have.CreatedAt), conflict.Want.Run, fmtTime(conflict.Want.CreatedAt))
	case errors.As(err, &conflict):
		return usageErrorf("%s holds data under run=%s that patrdb did not export (another tool, or an older patrdb): nothing was written; export under another name with --as NAME, or replace it with --replace",
			lk, conflict.Run)
	case errors.Is(err, lake.ErrConflict):
		return usageErrorf("%s: nothing was written", errorText(err))
	case errors.As(err, &busy):
		who := ""
		if busy.Holder != "" {
			who = " (" + busy.Holder + ")"
		}
		return usageErrorf("another process%s is exporting run %s into %s; wait for it, or stop it (patrdb serve --lake exports each step as it is checkpointed)", who, busy.Run, lk)
	case errors.Is(err, lake.ErrDropped), errors.Is(err, lake.ErrLayout), errors.Is(err, lake.ErrOptions):
		return usageErrorf("%s", errorText(err))
	case errors.Is(err, lake.ErrNoRun):
		return notFoundErrorf("%s holds no run %s", lk, run)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("interrupted: nothing partial was published to %s; run the command again to complete it", lk)
	}
	return err
}

// exportLake is export --format parquet.
func (a *App) exportLake(ctx context.Context, id string, f *exportFlags) error {
	lk, err := a.openLake("--out", f.out)
	if err != nil {
		return err
	}
	ctx, stop := onStop(ctx, nil)
	defer stop()
	db, done, err := a.openSnapshot(ctx, f.rf)
	if err != nil {
		return err
	}
	defer done()
	opts := lake.ExportOptions{As: f.as, Replace: f.replace, Verify: true}
	finishBar := func() {}
	if !a.json && a.isTerminal(a.stderr) {
		opts.OnProgress, finishBar = progressBar(a.stderr, "export "+id)
	}
	opts.OnProgress = a.pauseAtFirst(ctx, "export", opts.OnProgress)
	// Only found here: the export checks the whole run itself.
	if err := db.View(func(tx *store.Tx) error { _, err := a.lookupRun(tx, id, store.CheckSummary); return err }); err != nil {
		return err
	}
	made := ""
	if !lk.Remote() {
		if made, err = makeDirs(f.out); err != nil {
			return err
		}
	}
	res, err := lk.Export(ctx, db, id, opts)
	finishBar()
	if err != nil {
		published := res != nil && len(res.Files) > 0
		if made != "" && !published {
			os.RemoveAll(made) // the lake this export made, holding nothing
		}
		if errors.Is(err, context.Canceled) {
			if published {
				return fmt.Errorf("export interrupted after publishing %s whole: export again to complete it", plural(len(res.Files), "file", "files"))
			}
			return fmt.Errorf("export interrupted: nothing was written to %s", lk)
		}
		return a.lakeError(lk, id, err)
	}
	if a.json {
		return a.printJSON(res)
	}
	w := bufio.NewWriter(a.stdout)
	name := res.Run
	if name != id {
		name = fmt.Sprintf("%s (as %s)", id, res.Run)
	}
	switch {
	case len(res.Files) == 0:
		fmt.Fprintf(w, "the lake %s holds run %s through step %d already: nothing to add\n", res.Lake, name, res.Through)
	default:
		replaced := ""
		if res.Replaced {
			replaced = ", replacing the run it held under that name"
		}
		fmt.Fprintf(w, "added run %s to the lake %s: %s in %s, %s%s; it holds the run through step %d\n", name, res.Lake,
			plural(len(res.Files), "file", "files"), plural(len(res.Steps), "step", "steps"), fmtBytes(res.Bytes), replaced, res.Through)
	}
	if res.Whole {
		fmt.Fprintf(w, "the run is %s: exported whole\n", res.Status)
	}
	if n := len(res.HeldBack); n > 0 {
		held := fmt.Sprintf("step %d", res.HeldBack[0])
		if n > 1 {
			held = fmt.Sprintf("steps %d-%d", res.HeldBack[0], res.HeldBack[n-1])
		}
		fmt.Fprintf(w, "held back %s: not checkpointed yet; it joins once the trainer checkpoints it (export again, or serve with --lake)\n", held)
	}
	if len(res.Files) > 0 {
		printRows(w, res.Rows, lake.Tables)
	}
	return w.Flush()
}

// openSnapshot opens what a command that reads the whole file reads: the
// file, read-only; or, while a server holds it (--server, or the address
// its owner wrote next to it), a consistent copy fetched from that server
// into a temporary file. done closes it (and removes the copy).
func (a *App) openSnapshot(ctx context.Context, rf *remoteFlags) (*store.DB, func(), error) {
	cl, err := a.remote(ctx, rf)
	if err != nil {
		return nil, nil, err
	}
	if cl == nil {
		db, err := a.openRead()
		if err != nil {
			return nil, nil, err
		}
		return db, func() { db.Close() }, nil
	}
	f, err := os.CreateTemp("", "patrdb-snapshot-*.db")
	if err != nil {
		return nil, nil, err
	}
	path := f.Name()
	remove := func() { _ = os.Remove(path) }
	_, err = cl.Backup(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		remove()
		return nil, nil, a.remoteError(cl, err)
	}
	o := store.DefaultOptions()
	o.ReadOnly, o.Timeout, o.Clock = true, a.timeout, a.now
	db, err := store.Open(path, o)
	if err != nil {
		remove()
		return nil, nil, fmt.Errorf("the copy %s sent does not open: %w", cl.Base, err)
	}
	return db, func() { db.Close(); remove() }, nil
}
