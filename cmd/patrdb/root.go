// Command patrdb inspects, checks and compacts a patrdb file: the runs it
// holds, every rollout tree, trajectory, rubric and advantage in it
// (cmd/patrdb/README.md is the contract for names, flags and exit codes).
//
// # Conventions for a command
//
// Every command follows these, so that `replay`, `stats`, `export`, `demo`
// and whatever comes later look and fail the same way:
//
//   - One file per command, named for it (tree.go), holding
//     func newTreeCommand(app *App) *cobra.Command, listed once in
//     newRootCommand below; and one test file (tree_test.go). Tests run the
//     CLI in-process with cli(t, args...) against fixture(t), and compare
//     every text and JSON output with testdata/*.golden through
//     checkGoldens (go test -update rewrites them); see cli_test.go and
//     fixture_test.go.
//   - Positional arguments are checked with needArgs("RUN", "GROUP"), which
//     turns a wrong count into a usage error. Parse ids with parseID and run
//     ids with parseRunID.
//   - Use RunE and return errors; never print an error, call os.Exit or
//     panic. run() prints exactly one line, "patrdb: ...", and chooses the
//     exit code (errors.go): usageErrorf → 2 for a bad argument or flag value;
//     notFoundErrorf → 1 for a run, group, node or rubric that does not
//     exist; failedErrorf → 1 for a failed check; store errors map by their
//     sentinel (model.ErrNotFound → 1, everything else → 2).
//   - A command that reads runs registers --server with addRemoteFlags, ends
//     its long help with remoteHelp, and reads through app.read or
//     app.readRun (source.go): they hand it a source / runReader backed by
//     the file (opened read-only, everything read inside one db.View, so the
//     output is one consistent snapshot) or by the serve API of the process
//     that owns the file. It gathers its output struct from the runReader
//     and renders it once, so both paths print the same; add its golden
//     cases to remoteGoldens in remote_test.go. Find nodes with lookupNode
//     (its not-found error names what is missing). A command that needs
//     what the API does not serve (check, export, compact) opens the file
//     with app.openRead(), or app.openWrite() when it writes; `defer
//     db.Close()`; find the run with app.lookupRun, never tx.Run (it
//     walks with bounds the pages of the run it reads first: bbolt loops or overflows
//     its stack on a page that points back; the file source hands out
//     runs from a transaction in checked mode (store.Tx.CheckReads), whose
//     reads of a group, node or trajectory check the pages and records
//     they touch and whose other reads check the whole run first, so damage is one
//     "damaged" line, never partial output). Add a
//     read-only command
//     to readOnlyCommands in root_test.go: that proves it leaves the file
//     byte-identical, fails in one line within --timeout on a locked file,
//     and in one line on a missing or foreign file.
//   - Text goes to app.stdout. With app.json the command prints exactly one
//     JSON object with app.printJSON, built from structs declared in the
//     command's file with explicit snake_case json tags — never a store
//     record directly, whose encoding is not the CLI's contract — and its
//     fields are documented in README.md. Lists go in a named field
//     ({"runs": [...]}) so objects can grow without breaking readers.
//   - Colour only through app.paint, a no-op unless stdout is a terminal and
//     NO_COLOR is unset. Never read the environment or the clock directly:
//     use app.getenv and app.now, which tests replace.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/store"
)

// env is everything the process hands the CLI besides its arguments. Tests
// build their own (fixed clock, fake terminal, private environment).
type env struct {
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	getenv     func(string) string
	now        func() time.Time
	isTerminal func(io.Writer) bool
	pausePoint func(ctx context.Context, point string) // tests only: see App.pause
}

// App is the state one invocation of the CLI shares between its commands:
// the streams, the global flags, the clock and the environment.
type App struct {
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	getenv     func(string) string
	now        func() time.Time
	isTerminal func(io.Writer) bool
	pausePoint func(ctx context.Context, point string)

	// Global flags, filled in by cobra before any RunE runs.
	dbPath  string        // --db
	json    bool          // --json
	timeout time.Duration // --timeout: how long to wait for the file lock
	// timeoutSet: --timeout was given, so it also bounds each request to
	// a server (which otherwise gets remoteTimeout).
	timeoutSet bool
}

// defaultTimeout is the --timeout default: long enough to ride out a
// writer's commit, short enough that a locked file never looks like a hang.
const defaultTimeout = time.Second

// run is the whole CLI; main only passes it the process's streams and exits
// with what it returns. Tests call it (through runEnv) in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runEnv(args, env{
		stdin: stdin, stdout: stdout, stderr: stderr,
		getenv: os.Getenv, now: time.Now, isTerminal: isTerminal,
	})
}

func runEnv(args []string, e env) (code int) {
	app := &App{
		stdin: e.stdin, stdout: e.stdout, stderr: e.stderr,
		getenv: e.getenv, now: e.now, isTerminal: e.isTerminal, pausePoint: e.pausePoint,
	}
	// A damaged page can make bbolt panic or fault on the mmap; either way
	// the user gets one line and exit 2, never a Go stack trace.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			// Reads walk a run's pages before bbolt does, so what is left
			// is damage inside a page that walk cannot see.
			msg := fmt.Errorf("internal error: %v (if the file is damaged, patrdb check lists where)", r)
			if app.dbPath != "" {
				msg = fmt.Errorf("%s could not be read, it is probably damaged (internal error: %v): run patrdb check --db %s to list the damage", app.dbPath, r, app.dbPath)
			}
			fmt.Fprintln(e.stderr, errorLine(msg))
			code = exitUsage
		}
	}()
	root := newRootCommand(app)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	var ce *commandError
	if errors.As(err, &ce) {
		err = app.explain(err)
	} else if cmd != nil {
		// cobra's own complaint (unknown flag or command, bad flag value):
		// point at the help of the command the user was typing.
		err = fmt.Errorf("%w%s (see '%s --help')", err, suggest(cmd, err), cmd.CommandPath())
	}
	fmt.Fprintln(e.stderr, errorLine(err))
	return exitCode(err)
}

func newRootCommand(app *App) *cobra.Command {
	root := &cobra.Command{
		Use:   "patrdb",
		Short: "Inspect, check and compact a patrdb training-state file",
		Long: `patrdb reads the bbolt file in which a trainer keeps the state of
tree-structured agent RL: PaTR rollout trees, the ARBOR rubric buffer, GRPO
advantages and trainer checkpoints.

Exit status: 0 success, 1 not found or check failed, 2 usage or I/O error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			app.timeoutSet = cmd.Flags().Changed("timeout")
			return app.validateGlobals()
		},
	}
	root.SetIn(app.stdin)
	root.SetOut(app.stdout)
	root.SetErr(app.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })

	defaultDB := app.getenv("PATRDB_PATH")
	if defaultDB == "" {
		defaultDB = "./patr.db"
	}
	pf := root.PersistentFlags()
	pf.StringVar(&app.dbPath, "db", defaultDB, "the patrdb file; $PATRDB_PATH sets the default")
	pf.BoolVar(&app.json, "json", false, "machine-readable output: one JSON object, stable snake_case fields")
	pf.DurationVar(&app.timeout, "timeout", defaultTimeout, "how long to wait for another process's lock on the file")

	root.AddCommand(
		newRunsCommand(app),
		newShowCommand(app),
		newTreeCommand(app),
		newTrajCommand(app),
		newFrontierCommand(app),
		newRubricsCommand(app),
		newAdvCommand(app),
		newCheckCommand(app),
		newCompactCommand(app),
		newMigrateCommand(app),
		newDemoCommand(app),
		newServeCommand(app),
		newReplayCommand(app),
		newStatsCommand(app),
		newExportCommand(app),
		newBackupCommand(app),
		newRetainCommand(app),
		newRestoreCommand(app),
		newMarkCommand(app),
		newPlotCommand(app),
		newBatchCommand(app),
		newVersionCommand(app),
	)
	root.Version = versionText()
	root.SetVersionTemplate("{{.Version}}\n")
	// Unknown commands get one line from run(), not cobra's list.
	root.DisableSuggestions = true
	// cobra adds `completion` lazily; add it now so it can be made strict:
	// `completion tcsh` is a usage error (exit 2), not a help page and exit 0.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
	organiseHelp(root)
	tagCommandErrors(root)
	return root
}

// tagCommandErrors wraps every RunE so run() can tell an error a command
// returned from one cobra raised while parsing (which earns a help hint).
func tagCommandErrors(c *cobra.Command) {
	if c.RunE != nil {
		inner := c.RunE
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := inner(cmd, args); err != nil {
				return &commandError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		tagCommandErrors(sub)
	}
}

func (a *App) validateGlobals() error {
	if a.dbPath == "" {
		return usageErrorf("--db is empty")
	}
	if a.timeout <= 0 {
		return usageErrorf("--timeout %v: want a positive duration such as 500ms or 2s", a.timeout)
	}
	return nil
}

// openRead opens the file read-only, waiting at most --timeout for a writer's
// lock. The file must exist and is never modified.
func (a *App) openRead() (*store.DB, error) {
	if fi, err := os.Stat(a.dbPath); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageErrorf("%s does not exist (give --db PATH or set PATRDB_PATH)", a.dbPath)
		}
		return nil, a.openError(err)
	} else if !fi.Mode().IsRegular() {
		return nil, notRegular(a.dbPath, fi)
	}
	o := store.DefaultOptions()
	o.ReadOnly = true
	o.Timeout = a.timeout
	o.Clock = a.now
	db, err := store.Open(a.dbPath, o)
	if err != nil {
		return nil, a.openError(err)
	}
	return db, nil
}

// openWrite opens the file for writing, creating it if needed, waiting at
// most --timeout for another process's lock.
func (a *App) openWrite() (*store.DB, error) {
	if fi, err := os.Stat(a.dbPath); err == nil && !fi.Mode().IsRegular() {
		return nil, notRegular(a.dbPath, fi)
	}
	o := store.DefaultOptions()
	o.Timeout = a.timeout
	o.Clock = a.now
	db, err := store.Open(a.dbPath, o)
	if err != nil {
		return nil, a.openError(err)
	}
	return db, nil
}

// notRegular refuses a --db that is a device, a folder or a pipe: it can
// hold no patrdb file (and /dev/zero would only look empty).
func notRegular(path string, fi os.FileInfo) error {
	kind := "not a regular file"
	switch m := fi.Mode(); {
	case m.IsDir():
		kind = "a folder"
	case m&os.ModeDevice != 0:
		kind = "a device"
	case m&os.ModeNamedPipe != 0:
		kind = "a pipe"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	}
	return usageErrorf("%s is %s, not a patrdb file: give --db the path of the file", path, kind)
}

// openError turns the lock timeout into the message the store's lock rules ask for:
// which file, and how to look at a run that is still being written.
func (a *App) openError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// The store wraps the system's error, which names the path again.
		next := ""
		if errors.Is(pe.Err, fs.ErrPermission) {
			next = ": check the file's and its folder's permissions (read commands need read access; demo and serve need write access, or serve --read-only)"
		}
		return &codeError{exitUsage, fmt.Errorf("cannot %s %s: %v%s", pe.Op, pe.Path, pe.Err, next)}
	}
	if errors.Is(err, store.ErrTimeout) {
		return &codeError{exitUsage, fmt.Errorf(
			"%s is locked by another process (waited %v): inspect a live run through its serve API (patrdb serve, --server URL), or copy the file and run patrdb check / compact --out on the copy",
			a.dbPath, a.timeout)}
	}
	return err
}
