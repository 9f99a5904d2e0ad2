package main

import (
	"strconv"

	"github.com/patrdb/patrdb/model"
	"github.com/spf13/cobra"
)

// maxGroupCompletions bounds the group ids offered: the newest ones, so a
// long run's completion answers at once and still offers what is looked at
// most.
const maxGroupCompletions = 500

// completeRunGroups offers run ids for the first argument and, for the
// second, "latest" and the run's group ids, newest first, each described
// by its step and task.
func (a *App) completeRunGroups(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) != 1 {
		return a.completeRuns(cmd, args, toComplete)
	}
	out := []string{"latest\tthe run's most recent group"}
	var groups []model.Group
	err := a.read(completionRemote(cmd), func(src source) error {
		r, err := src.Run(args[0])
		if err != nil {
			return err
		}
		return r.ForEachGroup(0, func(g model.Group) error {
			groups = append(groups, g)
			if len(groups) > 4*maxGroupCompletions {
				groups = append(groups[:0], groups[len(groups)-maxGroupCompletions:]...)
			}
			return nil
		})
	})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	for i := len(groups) - 1; i >= 0 && len(out) <= maxGroupCompletions; i-- {
		g := groups[i]
		out = append(out, strconv.FormatUint(g.ID, 10)+"\tstep "+strconv.FormatUint(g.Step, 10)+" · "+g.Task)
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}
