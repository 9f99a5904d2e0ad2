package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/replay"
)

func newStatsCommand(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats [RUN]",
		Short: "Bytes per bucket, turns stored vs materialised, prefix sharing, routing and reward figures",
		Long: `stats summarises every run in the file, or one run in detail: how many
turns the file stores against how many a flat dump of every leaf trajectory
would hold (the prefix-sharing ratio), routing decisions (expansions,
prunes by rule, survivals), leaves per group, completed against pruned leaves
and their mean rewards, groups with zero outcome variance before and after
rubric shaping, the rubric pools at the end of each step, and the bytes each
of the run's buckets occupies.` + remoteHelp,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("stats takes at most RUN, got %s", plural(len(args), "argument", "arguments"))
			}
			return nil
		},
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error {
		run := ""
		if len(args) == 1 {
			run = args[0]
		}
		return app.stats(rf, run)
	}
	return cmd
}

// statsOutput is `stats --json`: every run, or the one asked for.
type statsOutput struct {
	Runs []statsRow `json:"runs"`
}

// statsRow is one run of `stats --json`: its statistics, or, for a run
// damaged where they read, its id and why (as `runs` and the API say it).
type statsRow struct {
	replay.RunStats
	Damaged string `json:"damaged,omitempty"`
}

func (a *App) stats(rf *remoteFlags, runArg string) error {
	var id string
	if runArg != "" {
		var err error
		if id, err = parseRunID(runArg); err != nil {
			return err
		}
	}
	var out statsOutput
	var listed error
	err := a.read(rf, func(src source) error {
		read := func(r runReader) (statsRow, error) {
			rs, err := r.stats()
			if err != nil {
				return statsRow{}, err
			}
			return statsRow{RunStats: *rs}, nil
		}
		if id != "" {
			r, err := src.Run(id)
			if err != nil {
				return err
			}
			row, err := read(r)
			out.Runs = []statsRow{row}
			return err
		}
		ids, err := src.RunIDs()
		if err != nil {
			return err
		}
		out.Runs, listed, err = listRuns(a, src, ids, read,
			func(id, why string) statsRow { return statsRow{RunStats: replay.RunStats{Run: id}, Damaged: why} })
		return err
	})
	if err != nil {
		return err
	}
	if err := a.printStats(out, id == ""); err != nil {
		return err
	}
	return listed
}

// printStats prints `stats`: its JSON, the table of every run, or the one
// run asked for.
func (a *App) printStats(out statsOutput, every bool) error {
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	if every {
		writeStatsTable(w, out.Runs)
	} else {
		writeRunStats(w, &out.Runs[0].RunStats)
	}
	return w.Flush()
}

func sharing(s replay.StepStats) string {
	if s.TurnsStored == 0 || s.Leaves == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", s.PrefixSharing)
}

// meanReward is a mean reward, "-" when no leaf has one.
func meanReward(m *float64) string {
	if m == nil {
		return "-"
	}
	return fmtNum(*m)
}

func meanOrDash(l replay.LeafStats) string {
	if l.Rewarded == 0 {
		return "-"
	}
	return fmtNum(l.MeanReward)
}

func writeStatsTable(w io.Writer, runs []statsRow) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "no runs")
		return
	}
	t := newTable(w)
	fmt.Fprintln(t, "RUN\tSTEPS\tGROUPS\tNODES\tLEAVES\tTURNS STORED\tMATERIALISED\tSHARING\tZERO-VAR BEFORE→AFTER\tEVENTS\tBYTES")
	for _, r := range runs {
		if r.Damaged != "" {
			fmt.Fprintf(t, "%s\tdamaged\t-\t-\t-\t-\t-\t-\t-\t-\t-\n", r.Run)
			continue
		}
		s := r.Total
		fmt.Fprintf(t, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d→%d\t%d\t%s\n", r.Run, len(r.Steps), s.Groups, s.Nodes, s.Leaves,
			s.TurnsStored, s.TurnsMaterialised, sharing(s), s.ZeroVarBefore, s.ZeroVarAfter, r.Events, fmtBytes(r.Bytes))
	}
	t.Flush()
}

func writeRunStats(w io.Writer, r *replay.RunStats) {
	s := r.Total
	fmt.Fprintf(w, "run %s: %s, %s, %s, %s (mean reward %s), %s, %s\n", r.Run, plural(len(r.Steps), "step", "steps"), plural(s.Groups, "group", "groups"),
		plural(s.Nodes, "node", "nodes"), plural(s.Leaves, "leaf", "leaves"), meanReward(s.MeanReward), plural(int(r.Events), "event", "events"), fmtBytes(r.Bytes))
	fmt.Fprintf(w, "  turns            %d stored, %d materialised in leaf trajectories: prefix sharing %s\n", s.TurnsStored, s.TurnsMaterialised, sharing(s))
	fmt.Fprintf(w, "  routing          %s, %s%s, %s\n", plural(s.Expansions, "expansion", "expansions"), plural(s.Prunes, "prune", "prunes"),
		rulesText(s.PrunesByRule), plural(s.Survivals, "survival", "survivals"))
	fmt.Fprintf(w, "  leaves per group %s (min %d, max %d)\n", fmtNum(s.LeavesPerGroup), s.MinLeaves, s.MaxLeaves)
	fmt.Fprintf(w, "  completed leaves %d, mean reward %s; pruned %d, mean reward %s; truncated %d, mean reward %s\n",
		s.Completed.Count, meanOrDash(s.Completed), s.Pruned.Count, meanOrDash(s.Pruned), s.Truncated.Count, meanOrDash(s.Truncated))
	fmt.Fprintf(w, "  zero variance    %d of %d groups before rubric shaping, %d after (%d unlocked)\n", s.ZeroVarBefore, s.AdvGroups, s.ZeroVarAfter, s.UnlockedGroups)
	if s.Active > 0 || s.Failed > 0 {
		fmt.Fprintf(w, "  in flight        %d active, %d failed nodes\n", s.Active, s.Failed)
	}
	if s.MaxPolicyVersion > 0 {
		fmt.Fprintf(w, "  policy versions  %d–%d; staleness when sampled mean %s max %d, when consumed mean %s max %d\n",
			s.MinPolicyVersion, s.MaxPolicyVersion, fmtNum(s.SampledMean), s.SampledMax, fmtNum(s.ConsumedMean), s.ConsumedMax)
	}
	if len(r.Steps) > 0 {
		fmt.Fprintln(w)
		t := newTable(w)
		fmt.Fprintln(t, "STEP\tGROUPS\tNODES\tLEAVES\tSTORED\tMATERIALISED\tSHARING\tEXPAND\tPRUNE\tSURVIVE\tCOMPLETED (MEAN)\tPRUNED (MEAN)\tZERO-VAR BEFORE→AFTER")
		for _, st := range r.Steps {
			fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\t%d\t%d (%s)\t%d (%s)\t%d→%d\n", st.Step, st.Groups, st.Nodes, st.Leaves,
				st.TurnsStored, st.TurnsMaterialised, sharing(st), st.Expansions, st.Prunes, st.Survivals,
				st.Completed.Count, meanOrDash(st.Completed), st.Pruned.Count, meanOrDash(st.Pruned), st.ZeroVarBefore, st.ZeroVarAfter)
		}
		t.Flush()
	}
	if len(r.Pools) > 0 {
		fmt.Fprintln(w)
		t := newTable(w)
		fmt.Fprintln(t, "RUBRIC POOLS AT END OF STEP\tCANDIDATE\tPUBLIC\tRETIRED\tMERGED")
		for _, p := range r.Pools {
			fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\n", p.Step, p.Candidate, p.Public, p.Retired, p.Merged)
		}
		t.Flush()
	}
	fmt.Fprintln(w)
	t := newTable(w)
	fmt.Fprintln(t, "BUCKET\tKEYS\tBYTES\tUSED")
	for _, b := range r.Buckets {
		fmt.Fprintf(t, "%s\t%d\t%s\t%s\n", b.Name, b.Keys, fmtBytes(b.Bytes), fmtBytes(b.Used))
	}
	t.Flush()
}

func rulesText(byRule map[string]int) string {
	if len(byRule) == 0 {
		return ""
	}
	rules := make([]string, 0, len(byRule))
	for k := range byRule {
		rules = append(rules, k)
	}
	sort.Strings(rules)
	parts := make([]string, len(rules))
	for i, k := range rules {
		parts[i] = fmt.Sprintf("%s %d", k, byRule[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
