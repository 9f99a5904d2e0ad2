package main

import (
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/store"
)

// needArgs accepts exactly the named positional arguments and turns any
// other count into a usage error that says what was expected.
func needArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return nil
		}
		if len(names) == 0 {
			return usageErrorf("%s takes no arguments, got %q", cmd.Name(), args)
		}
		return usageErrorf("%s takes %s, got %s", cmd.Name(), strings.Join(names, " "), plural(len(args), "argument", "arguments"))
	}
}

// parseID parses a positive integer id (group, node, rubric, step); what
// names the argument in the error.
func parseID(what, s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageErrorf("%s %q: want a positive integer", what, s)
	}
	return id, nil
}

// parseRunID rejects a string that cannot name a run, before the file is
// even opened.
func parseRunID(s string) (string, error) {
	if !store.ValidRunID(s) {
		return "", usageErrorf("RUN %q: a run id is %s", s, store.RunIDRule)
	}
	return s, nil
}

// lookupRun returns the run's handle, or a not-found error naming the run
// and the file, for a command that reads the whole run or writes it. It
// checks the meta pages (a damaged one means an older commit is read) and
// walks the pages of parts of the run first (a damaged page would send
// bbolt into a loop): every page (store.CheckPages) for a command that
// reads all of the run, the summary's (store.CheckSummary) for one that
// only finds it. A command that prints the run's records reads through
// app.readRun (checked mode), or checks the whole run first (store's
// Check with CheckOptions.Run).
func (a *App) lookupRun(tx *store.Tx, id string, parts store.CheckParts) (*store.RunTx, error) {
	if _, err := tx.Check(&store.CheckOptions{Parts: store.CheckMetas}); err != nil {
		return nil, a.damaged(err)
	}
	if _, err := tx.Check(&store.CheckOptions{Run: id, Parts: parts}); err != nil {
		return nil, a.damaged(err)
	}
	r, err := tx.Run(id)
	if errors.Is(err, model.ErrNotFound) {
		return nil, a.runNotFound(tx, id)
	}
	return r, err
}

// runNotFound is the error for a run the file does not hold, naming the
// runs it does.
func (a *App) runNotFound(tx *store.Tx, id string) error {
	if _, err := tx.Check(&store.CheckOptions{Parts: store.CheckRunList}); err != nil {
		return a.damaged(err)
	}
	ids, _ := tx.RunIDs()
	return notFoundErrorf("run %q not found in %s%s", id, a.dbPath, runsPresent(ids))
}

// lookupNode returns a node of run r, or a not-found error naming it.
func lookupNode(r runReader, id uint64) (model.Node, error) {
	n, err := r.Node(id)
	if errors.Is(err, model.ErrNotFound) {
		return n, notFoundErrorf("node %d not found in run %q", id, r.ID())
	}
	return n, err
}

// completeRuns offers the run ids for a command's first argument, from the
// file or, as the command itself would, through the owner's server. It
// waits at most --timeout, and offers nothing when it cannot (completion
// must never block a shell).
func (a *App) completeRuns(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) != 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var ids []string
	err := a.read(completionRemote(cmd), func(src source) error {
		var err error
		ids, err = src.RunIDs()
		return err
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return ids, cobra.ShellCompDirectiveNoFileComp
}

// completionRemote is the --server and --token-file a command line being
// completed gave, so completion reads where the command would.
func completionRemote(cmd *cobra.Command) *remoteFlags {
	rf := &remoteFlags{}
	if f := cmd.Flags().Lookup("server"); f != nil {
		rf.server = f.Value.String()
	}
	if f := cmd.Flags().Lookup("token-file"); f != nil {
		rf.tokenFile = f.Value.String()
	}
	return rf
}

func isNotFound(err error) bool { return errors.Is(err, model.ErrNotFound) }

// runsPresent names the runs a not-found run could have been: all of them,
// or the first few and how many more.
func runsPresent(ids []string) string {
	const most = 8
	switch {
	case len(ids) == 0:
		return " (it holds no runs)"
	case len(ids) > most:
		return fmt.Sprintf(" (runs: %s and %d more; patrdb runs lists them)", strings.Join(ids[:most], ", "), len(ids)-most)
	}
	return " (runs: " + strings.Join(ids, ", ") + ")"
}
