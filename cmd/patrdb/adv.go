package main

import (
	"bufio"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newAdvCommand(app *App) *cobra.Command {
	var stepArg string
	cmd := &cobra.Command{
		Use:   "adv RUN",
		Short: "GRPO advantages per group at a step: mean, std, zero-variance flags, each leaf",
		Long: `adv prints, for every group of a step (default: the last step with
advantage records), the group's mean and std, whether the outcome rewards had
zero variance before rubric shaping and whether the totals still had after,
and per leaf its outcome reward, centred rubric score, total and advantage.
Groups of the step that are still open are listed without advantages.` + remoteHelp,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(_ *cobra.Command, args []string) error { return app.adv(rf, args[0], stepArg) }
	cmd.Flags().StringVar(&stepArg, "step", "last", "step `N`, or last")
	return cmd
}

// advOutput is `adv --json`.
type advOutput struct {
	Run    string     `json:"run"`
	Step   uint64     `json:"step"`
	Groups []advGroup `json:"groups"`
}

type advGroup struct {
	Group             uint64    `json:"group"`
	Task              string    `json:"task"`
	Status            string    `json:"status"`
	Mean              *float64  `json:"mean"` // null while the group has no advantage records
	Std               *float64  `json:"std"`
	ZeroVariance      *bool     `json:"zero_variance"`       // of the outcome rewards, before shaping
	ZeroVarianceAfter *bool     `json:"zero_variance_after"` // of the totals, after shaping
	Lambda            *float64  `json:"lambda"`
	Rubrics           []uint64  `json:"rubrics"` // rubrics whose scores shaped the rewards
	Leaves            []advLeaf `json:"leaves"`
}

type advLeaf struct {
	Leaf        uint64  `json:"leaf"`
	Status      string  `json:"status"`
	Outcome     float64 `json:"outcome"`
	RubricScore float64 `json:"rubric_score"` // centred within the group
	Total       float64 `json:"total"`        // outcome + lambda * rubric_score
	Advantage   float64 `json:"advantage"`
}

func (a *App) adv(rf *remoteFlags, runArg, stepArg string) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	var step uint64
	if stepArg != "last" {
		if step, err = parseID("--step", stepArg); err != nil {
			return err
		}
	}
	var out advOutput
	err = a.readRun(rf, id, func(r runReader) error {
		out, err = advAt(r, step)
		return err
	})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	writeAdv(w, out)
	return w.Flush()
}

// advAt reads the advantage records of a step (0: the last step that has
// any) grouped by group, with the step's groups that have none yet.
func advAt(r runReader, step uint64) (advOutput, error) {
	out := advOutput{Run: r.ID(), Groups: []advGroup{}}
	if step == 0 {
		last, err := r.LastAdvantage() // keys are step|group|leaf: the last is of the newest step
		if isNotFound(err) {
			return out, notFoundErrorf("run %q has no advantage records yet", r.ID())
		}
		if err != nil {
			return out, err
		}
		step = last.Step
	}
	out.Step = step
	groups, err := r.Groups(step)
	if err != nil {
		return out, err
	}
	advs, err := r.Advantages(step, 0)
	if err != nil {
		return out, err
	}
	if len(groups) == 0 && len(advs) == 0 {
		return out, notFoundErrorf("step %d of run %q has no groups", step, r.ID())
	}
	byGroup := map[uint64][]model.Advantage{}
	for _, ad := range advs {
		byGroup[ad.Group] = append(byGroup[ad.Group], ad)
	}
	for _, g := range groups {
		ag := advGroup{Group: g.ID, Task: g.Task, Status: string(g.Status), Rubrics: []uint64{}, Leaves: []advLeaf{}}
		recs := byGroup[g.ID]
		if len(recs) > 0 {
			f := recs[0]
			ag.Mean, ag.Std, ag.Lambda = &f.Mean, &f.Std, &f.Lambda
			ag.ZeroVariance, ag.ZeroVarianceAfter = &f.ZeroVariance, &f.ZeroVarianceAfter
			ag.Rubrics = nonNil(f.Rubrics)
		}
		// The leaves' statuses come from the group's nodes: one read per
		// group (one request through a server), not one per leaf.
		var statusOf map[uint64]model.NodeStatus
		if len(recs) > 0 {
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return out, err
			}
			statusOf = make(map[uint64]model.NodeStatus, len(nodes))
			for _, n := range nodes {
				statusOf[n.ID] = n.Status
			}
		}
		for _, ad := range recs {
			status := string(statusOf[ad.Leaf]) // "" for a leaf not in the group
			ag.Leaves = append(ag.Leaves, advLeaf{Leaf: ad.Leaf, Status: status, Outcome: ad.Outcome,
				RubricScore: ad.RubricScore, Total: ad.Total, Advantage: ad.Advantage})
		}
		out.Groups = append(out.Groups, ag)
	}
	return out, nil
}

func writeAdv(w io.Writer, o advOutput) {
	fmt.Fprintf(w, "run %s · step %d · %s\n", o.Run, o.Step, plural(len(o.Groups), "group", "groups"))
	for _, g := range o.Groups {
		fmt.Fprintln(w)
		head := fmt.Sprintf("group %d · task %q · %s", g.Group, g.Task, g.Status)
		if g.Mean == nil {
			fmt.Fprintln(w, head+" · no advantages yet")
			continue
		}
		head += fmt.Sprintf(" · %s · mean %s · std %s · zero variance: %s, after shaping: %s",
			plural(len(g.Leaves), "leaf", "leaves"), fmtNum(*g.Mean), fmtNum(*g.Std), yesNo(*g.ZeroVariance), yesNo(*g.ZeroVarianceAfter))
		if len(g.Rubrics) > 0 {
			ids := make([]string, len(g.Rubrics))
			for i, id := range g.Rubrics {
				ids[i] = fmt.Sprint(id)
			}
			head += fmt.Sprintf(" · lambda %s · rubrics %s", fmtNum(*g.Lambda), strings.Join(ids, ","))
		}
		fmt.Fprintln(w, head)
		t := newTable(w)
		fmt.Fprintln(t, "  LEAF\tSTATUS\tOUTCOME\tRUBRIC\tTOTAL\tADVANTAGE")
		for _, l := range g.Leaves {
			fmt.Fprintf(t, "  %d\t%s\t%s\t%s\t%s\t%s\n", l.Leaf, l.Status, fmtNum(l.Outcome), fmtSigned(l.RubricScore), fmtNum(l.Total), fmtSigned(l.Advantage))
		}
		t.Flush()
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
