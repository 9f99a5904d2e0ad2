package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rubricpool"
)

func newRubricsCommand(app *App) *cobra.Command {
	var pool, lineage string
	cmd := &cobra.Command{
		Use:   "rubrics RUN",
		Short: "The ARBOR rubric pools with usage statistics, or one rubric's lineage",
		Long: `rubrics lists the run's rubric buffer: per rubric its pool, support,
activations, running correlation with the outcome (from the stored sums),
low-variance streak, last activation step, groups unlocked, and why it
retired. --pool keeps one pool. --lineage ID shows a public rubric and the
drafts it absorbed, with where each was induced.` + remoteHelp,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error { return app.rubrics(rf, args[0], pool, lineage) }
	cmd.Flags().StringVar(&pool, "pool", "all", "pool to list: candidate, public, retired, merged or all")
	cmd.Flags().StringVar(&lineage, "lineage", "", "show rubric `ID` and the drafts it absorbed")
	cmd.MarkFlagsMutuallyExclusive("pool", "lineage")
	_ = cmd.RegisterFlagCompletionFunc("pool", cobra.FixedCompletions([]string{"candidate", "public", "retired", "merged", "all"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// rubricsOutput is `rubrics --json`.
type rubricsOutput struct {
	Run     string                  `json:"run"`
	Pool    string                  `json:"pool"`
	Rubrics []rubricpool.RubricView `json:"rubrics"`
}

// lineageOutput is `rubrics --lineage ID --json`.
type lineageOutput struct {
	Run    string                  `json:"run"`
	Rubric rubricpool.RubricView   `json:"rubric"`
	Drafts []rubricpool.RubricView `json:"drafts"`
}

// lastActive is a rubric's last activation step; steps start at 1, so 0
// (an unset usage record) means never, like -1.
func lastActive(r rubricpool.RubricView) string {
	if r.Usage.LastActivation <= 0 {
		return "never"
	}
	return fmt.Sprintf("step %d", r.Usage.LastActivation)
}

func (a *App) rubrics(rf *remoteFlags, runArg, poolArg, lineageArg string) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	var pool model.RubricPool
	if poolArg != "all" {
		pool = model.RubricPool(poolArg)
		if !pool.Valid() {
			return usageErrorf("--pool %q: want candidate, public, retired, merged or all", poolArg)
		}
	}
	var lineage uint64
	if lineageArg != "" {
		if lineage, err = parseID("--lineage", lineageArg); err != nil {
			return err
		}
	}
	var list rubricsOutput
	var lin lineageOutput
	err = a.readRun(rf, id, func(r runReader) error {
		if lineage != 0 {
			lin, err = rubricLineage(r, lineage)
			return err
		}
		rbs, err := r.Rubrics(pool)
		if err != nil {
			return err
		}
		list = rubricsOutput{Run: id, Pool: poolArg, Rubrics: []rubricpool.RubricView{}}
		for _, rb := range rbs {
			list.Rubrics = append(list.Rubrics, rubricpool.ViewRubric(rb))
		}
		return nil
	})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(a.stdout)
	switch {
	case lineage != 0 && a.json:
		return a.printJSON(lin)
	case lineage != 0:
		writeLineage(w, lin)
	case a.json:
		return a.printJSON(list)
	default:
		writeRubricTable(w, list)
	}
	return w.Flush()
}

// rubricLineage returns a rubric and the drafts it consolidated: those it
// lists as parents and those recorded as merged into it.
func rubricLineage(r runReader, id uint64) (lineageOutput, error) {
	rb, err := r.Rubric(id)
	if err != nil {
		if isNotFound(err) {
			return lineageOutput{}, notFoundErrorf("rubric %d not found in run %q", id, r.ID())
		}
		return lineageOutput{}, err
	}
	out := lineageOutput{Run: r.ID(), Rubric: rubricpool.ViewRubric(rb), Drafts: []rubricpool.RubricView{}}
	ids := map[uint64]bool{}
	for _, p := range rb.Parents {
		ids[p] = true
	}
	all, err := r.Rubrics("")
	if err != nil {
		return out, err
	}
	for _, d := range all {
		if d.MergedInto == id || ids[d.ID] {
			out.Drafts = append(out.Drafts, rubricpool.ViewRubric(d))
		}
	}
	sort.Slice(out.Drafts, func(i, j int) bool { return out.Drafts[i].ID < out.Drafts[j].ID })
	return out, nil
}

func writeRubricTable(w io.Writer, o rubricsOutput) {
	if len(o.Rubrics) == 0 {
		if o.Pool == "all" {
			fmt.Fprintf(w, "run %s has no rubrics\n", o.Run)
		} else {
			fmt.Fprintf(w, "run %s has no %s rubrics\n", o.Run, o.Pool)
		}
		return
	}
	t := newTable(w)
	fmt.Fprintln(t, "ID\tPOOL\tSUPPORT\tACTIVATIONS\tCORR\tSTREAK\tLAST ACTIVE\tUNLOCKED\tRETIRED\tTEXT")
	counts := map[model.RubricPool]int{}
	for _, r := range o.Rubrics {
		counts[r.Pool]++
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%s\t%d\t%s\t%d\t%s\t%s\n", r.ID, r.Pool, r.Support, r.Usage.Activations,
			optNum(r.RunningCorr), r.Usage.LowVarStreak, lastActive(r), r.Usage.GroupsUnlocked, retired(r), truncate(r.Text, 60))
	}
	t.Flush()
	var parts []string
	for _, p := range rubricPools {
		if c := counts[p]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, p))
		}
	}
	fmt.Fprintf(w, "%s: %s\n", plural(len(o.Rubrics), "rubric", "rubrics"), strings.Join(parts, ", "))
}

func writeLineage(w io.Writer, o lineageOutput) {
	r := o.Rubric
	fmt.Fprintf(w, "rubric %d · %s · support %d · created step %d", r.ID, r.Pool, r.Support, r.CreatedStep)
	if r.MergedInto != 0 {
		fmt.Fprintf(w, " · merged into %d", r.MergedInto)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  text         %s\n", oneLineText(r.Text))
	fmt.Fprintf(w, "  usage        %s · corr %s · streak %d · last active %s · %s unlocked\n",
		plural(r.Usage.Activations, "activation", "activations"), optNum(r.RunningCorr), r.Usage.LowVarStreak, lastActive(r), plural(r.Usage.GroupsUnlocked, "group", "groups"))
	if r.RetireStep != 0 || r.RetireReason != "" {
		fmt.Fprintf(w, "  retired      %s\n", retired(r))
	}
	if len(o.Drafts) == 0 {
		fmt.Fprintln(w, "absorbed no drafts")
		return
	}
	fmt.Fprintf(w, "absorbed %s:\n", plural(len(o.Drafts), "draft", "drafts"))
	t := newTable(w)
	fmt.Fprintln(t, "  ID\tPOOL\tSTEP\tGROUP\tANCHORS\tSUPPORT\tVARIANCE\tRHO\tTEXT")
	for _, d := range o.Drafts {
		anchors := make([]string, len(d.Origin.Anchors))
		for i, a := range d.Origin.Anchors {
			anchors[i] = fmt.Sprint(a)
		}
		an := strings.Join(anchors, ",")
		if an == "" {
			an = "-"
		}
		fmt.Fprintf(t, "  %d\t%s\t%d\t%d\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.Pool, d.Origin.Step, d.Origin.Group, an, d.Support,
			fmtNum(d.Variance), fmtNum(d.Rho), oneLineText(d.Text))
	}
	t.Flush()
}

func optNum(x *float64) string {
	if x == nil {
		return "-"
	}
	return fmtNum(*x)
}

func retired(r rubricpool.RubricView) string {
	if r.RetireStep == 0 && r.RetireReason == "" {
		return "-"
	}
	s := fmt.Sprintf("step %d", r.RetireStep)
	if r.RetireReason != "" {
		s += ": " + r.RetireReason
	}
	return s
}

// oneLineText folds whitespace so a rubric's text fits a table row.
func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }
