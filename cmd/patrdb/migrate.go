package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/store"
)

func newMigrateCommand(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate SRC DST",
		Short: "Copy a file of an older format into a new file of the current one",
		Long: `migrate copies the patrdb file SRC, written by an older format, into a new
file DST in the format this build writes, then verifies the copy: it must
check clean and read back every record of SRC. SRC is opened read-only and
never changes; DST must not exist, and is removed again if the copy fails.
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
	o := store.DefaultOptions()
	o.Timeout = a.timeout
	res, err := store.Migrate(src, dst, o)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	_, err = fmt.Fprintf(a.stdout, "migrated %s (format %d) into %s (format %d): %s, %s, %s\n",
		src, res.From, dst, res.To, plural(res.Runs, "run", "runs"), plural(res.Nodes, "node", "nodes"), plural(res.Turns, "turn", "turns"))
	return err
}
