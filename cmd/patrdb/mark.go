package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

func newMarkCommand(app *App) *cobra.Command {
	var rf *remoteFlags
	cmd := &cobra.Command{
		Use:   "mark RUN finished|failed|running",
		Short: "Set a run's status: finished, failed, or running again",
		Long: `mark sets the run's status, as a trainer does when it ends: finished or
failed, or running again. A trainer that stopped without saying (a driver
loop that just ended, a killed job) leaves its run running; mark it
finished or failed so every reader knows, and so export adds it to a lake
whole, its open step included. The change is an event of the run's log.

While a server holds the file, the status is set through it.`,
		Args:              needArgs("RUN", "STATUS"),
		ValidArgsFunction: app.completeRuns,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.mark(cmd.Context(), args[0], args[1], rf)
		},
	}
	rf = addRemoteFlags(app, cmd)
	return cmd
}

// markOutput is `mark --json`.
type markOutput struct {
	Run      string          `json:"run"`
	Status   model.RunStatus `json:"status"`
	Was      model.RunStatus `json:"was"`
	LastStep uint64          `json:"last_step"`
}

func (a *App) mark(ctx context.Context, runArg, status string, rf *remoteFlags) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	s := model.RunStatus(status)
	switch s {
	case model.RunFinished, model.RunFailed, model.RunRunning:
	default:
		return usageErrorf("status %q: want finished, failed or running", status)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	out := markOutput{Run: id, Status: s}
	cl, err := a.remote(ctx, rf)
	if err != nil {
		return err
	}
	if cl != nil {
		before, err := cl.Run(ctx, id)
		if err != nil {
			return a.remoteError(cl, err)
		}
		run, err := cl.SetRunStatus(ctx, id, api.RunStatusRequest{Status: s})
		if err != nil {
			return a.remoteError(cl, err)
		}
		out.Was, out.LastStep = before.Status, run.LastStep
	} else {
		db, err := a.openWrite()
		if err != nil {
			return err
		}
		defer db.Close()
		err = db.Update(func(tx *store.Tx) error {
			// It reads the run record and appends an event.
			r, err := a.lookupRun(tx, id, store.CheckSummary|store.CheckLastEvent)
			if err != nil {
				return err
			}
			info, err := r.Info()
			if err != nil {
				return err
			}
			out.Was, out.LastStep = info.Status, info.LastStep
			if info.Status == s {
				return nil
			}
			return r.SetRunStatus(s)
		})
		if err != nil {
			return err
		}
	}
	if a.json {
		return a.printJSON(out)
	}
	if out.Was == s {
		_, err = fmt.Fprintf(a.stdout, "run %s is %s already (last completed step %d)\n", id, s, out.LastStep)
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "marked run %s %s (was %s; last completed step %d)\n", id, s, out.Was, out.LastStep)
	return err
}
