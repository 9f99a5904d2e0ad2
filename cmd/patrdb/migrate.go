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

func newMigrateCommand(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate SRC DST",
		Short: "Copy a file of an older format into a new file of the current one",
		Long: `migrate copies the patrdb file SRC, written by an older format, into a new
file DST in the format this build writes, then verifies the copy: it must
check clean and read back every record of SRC. SRC is opened read-only and
never changes; DST must not exist. The copy is built under a temporary name
beside DST and appears at DST only once it is complete and verified: a
failure, or SIGINT, SIGTERM or SIGHUP, leaves no DST and nothing temporary.
Older files open and read as they are; only writing to them needs this.`,
		Example: "  patrdb migrate old.db new.db",
		Args:    needArgs("SRC", "DST"),
		RunE: func(_ *cobra.Command, args []string) error {
			return app.migrate(args[0], args[1])
		},
	}
}

func (a *App) migrate(src, dst string) error {
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return notFoundErrorf("%s does not exist", src)
	}
	if _, err := os.Lstat(dst); err == nil {
		return usageErrorf("%s already exists; migrate never overwrites (remove it or choose another DST)", dst)
	}
	// The copy is built under a temporary name beside DST and renamed to
	// it once verified, so DST never holds a half-migrated file (one that
	// checks clean with "0 runs" looks finished); a stop signal removes it
	// and stops the copy.
	g, ctx := publish.Watch(context.Background())
	defer g.Close()
	out, err := g.Begin(dst)
	if err != nil {
		return published(ctx, err, "migrate", dst, "DST")
	}
	defer out.Abort()
	o := store.DefaultOptions()
	o.Timeout = a.timeout
	res, err := store.MigrateContext(ctx, src, out.Path(), o)
	switch {
	case ctx.Err() != nil:
		return interrupted("migrate", dst)
	case err != nil:
		return err
	}
	a.pause(ctx, "migrate")
	if err := out.Publish(false); err != nil {
		return published(ctx, err, "migrate", dst, "DST")
	}
	if a.json {
		return a.printJSON(res)
	}
	_, err = fmt.Fprintf(a.stdout, "migrated %s (format %d) into %s (format %d): %s, %s, %s\n",
		src, res.From, dst, res.To, plural(res.Runs, "run", "runs"), plural(res.Nodes, "node", "nodes"), plural(res.Turns, "turn", "turns"))
	return err
}
