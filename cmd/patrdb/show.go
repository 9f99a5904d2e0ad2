package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/patrdb/patrdb/model"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

func newShowCommand(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "A run's config, status, step progress and counts (--bytes: on-disk size)",
		Long: `show prints one run: its status and step progress (the last completed step
and what the step in progress has done so far), how many groups, nodes (by
status), leaves, turns, rubrics (by pool) and events it holds, its latest
trainer checkpoint, a table of its steps, and its configuration. The
figures come from the run's counters; --bytes adds the bytes its buckets
occupy, which reads every page of the run.` + remoteHelp,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	bytes := cmd.Flags().Bool("bytes", false, "add the bytes the run's buckets occupy (reads every page of the run)")
	cmd.RunE = func(_ *cobra.Command, args []string) error { return app.show(rf, args[0], *bytes) }
	return cmd
}

// Orders in which statuses and pools are listed, stable for --json readers.
var (
	nodeStatuses = []model.NodeStatus{model.NodeActive, model.NodeExpanded, model.NodeCompleted, model.NodePruned, model.NodeTruncated, model.NodeFailed}
	rubricPools  = []model.RubricPool{model.PoolCandidate, model.PoolPublic, model.PoolRetired, model.PoolMerged}
)

// showOutput is `show --json`: the store's summary of the run (with the
// steps below instead of its own) and the run's record, rubrics and
// checkpoint.
type showOutput struct {
	model.RunSummary
	CreatedAt     string            `json:"created_at"`
	UpdatedAt     string            `json:"updated_at"`
	Meta          map[string]string `json:"meta"`
	Config        json.RawMessage   `json:"config"`
	RubricsByPool map[string]int    `json:"rubrics_by_pool"`
	Checkpoint    *checkpointJSON   `json:"checkpoint"`
	Steps         []stepRow         `json:"steps"`
}

type checkpointJSON struct {
	Step        uint64            `json:"step"`
	InlineBytes int               `json:"inline_bytes"`
	URI         string            `json:"uri"`
	Hash        string            `json:"hash"`
	CreatedAt   string            `json:"created_at"`
	Meta        map[string]string `json:"meta"`
}

// stepRow is one step of a run: the store's figures and whether the step
// has a checkpoint.
type stepRow struct {
	model.StepSummary
	Checkpoint bool `json:"checkpoint"`
}

func (a *App) show(rf *remoteFlags, arg string, withBytes bool) error {
	id, err := parseRunID(arg)
	if err != nil {
		return err
	}
	var out showOutput
	err = a.read(rf, func(src source) error {
		r, err := src.summaryRun(id, withBytes)
		if err != nil {
			return err
		}
		out, err = showRun(r, withBytes)
		return err
	})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	printShow(w, out)
	return w.Flush()
}

func showRun(r runReader, withBytes bool) (showOutput, error) {
	info, err := r.Info()
	if err != nil {
		return showOutput{}, err
	}
	s, err := r.Summary(model.SummaryOptions{Steps: true, Buckets: withBytes})
	if err != nil {
		return showOutput{}, err
	}
	out := showOutput{
		RunSummary: s, CreatedAt: jsonTime(info.CreatedAt), UpdatedAt: jsonTime(info.UpdatedAt),
		Meta: info.Meta, Config: rawJSON(info.Config), RubricsByPool: map[string]int{}, Steps: []stepRow{},
	}
	out.RunSummary.Steps = nil
	if out.Meta == nil {
		out.Meta = map[string]string{}
	}
	rubrics, err := r.Rubrics("")
	if err != nil {
		return out, err
	}
	for _, p := range rubricPools {
		out.RubricsByPool[string(p)] = 0
	}
	for _, rb := range rubrics {
		out.RubricsByPool[string(rb.Pool)]++
	}
	ck, err := r.Checkpoint(0)
	switch {
	case err == nil:
		out.Checkpoint = &checkpointJSON{Step: ck.Step, InlineBytes: len(ck.Inline), URI: ck.URI, Hash: ck.Hash,
			CreatedAt: jsonTime(ck.CreatedAt), Meta: ck.Meta}
		if out.Checkpoint.Meta == nil {
			out.Checkpoint.Meta = map[string]string{}
		}
	case !errors.Is(err, model.ErrNotFound):
		return out, err
	}
	for _, st := range s.Steps {
		row := stepRow{StepSummary: st}
		ck, err := r.Checkpoint(st.Step)
		switch {
		case err == nil:
			row.Checkpoint = ck.Step == st.Step
		case !errors.Is(err, model.ErrNotFound):
			return out, err
		}
		out.Steps = append(out.Steps, row)
	}
	return out, nil
}

func printShow(w io.Writer, o showOutput) {
	t := newTable(w)
	fmt.Fprintf(t, "run\t%s\n", o.Run)
	fmt.Fprintf(t, "status\t%s\n", o.Status)
	fmt.Fprintf(t, "steps\t%s\n", stepProgress(o))
	fmt.Fprintf(t, "created\t%s\n", o.CreatedAt)
	fmt.Fprintf(t, "updated\t%s\n", o.UpdatedAt)
	if len(o.Meta) > 0 {
		keys := make([]string, 0, len(o.Meta))
		for k := range o.Meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + o.Meta[k]
		}
		fmt.Fprintf(t, "meta\t%s\n", strings.Join(parts, " "))
	}
	fmt.Fprintf(t, "groups\t%d (%d open)\n", o.Groups, o.OpenGroups)
	var parts []string
	for _, st := range nodeStatuses {
		if c := o.ByStatus[st]; c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, st))
		}
	}
	fmt.Fprintf(t, "nodes\t%d: %s\n", o.Nodes, strings.Join(parts, ", "))
	fmt.Fprintf(t, "leaves\t%d, mean reward %s\n", o.Leaves, meanReward(o.MeanReward))
	fmt.Fprintf(t, "frontier\t%d active\n", o.Frontier)
	fmt.Fprintf(t, "turns\t%d stored\n", o.Turns)
	parts = parts[:0]
	for _, p := range rubricPools {
		parts = append(parts, fmt.Sprintf("%d %s", o.RubricsByPool[string(p)], p))
	}
	fmt.Fprintf(t, "rubrics\t%s\n", strings.Join(parts, ", "))
	fmt.Fprintf(t, "events\t%d\n", o.Events)
	if o.Buckets != nil {
		fmt.Fprintf(t, "bytes\t%d (%s) in the run's buckets\n", o.Bytes, fmtBytes(o.Bytes))
	}
	if c := o.Checkpoint; c != nil {
		where := fmt.Sprintf("%d B inline", c.InlineBytes)
		if c.URI != "" {
			where = c.URI
			if c.Hash != "" {
				where += " (" + c.Hash + ")"
			}
		}
		fmt.Fprintf(t, "checkpoint\tstep %d: %s, %s\n", c.Step, where, c.CreatedAt)
	} else {
		fmt.Fprintf(t, "checkpoint\tnone\n")
	}
	t.Flush()
	if o.Walked {
		printWalked(w, []string{o.Run})
	}

	if len(o.Steps) > 0 {
		fmt.Fprintln(w)
		t = newTable(w)
		fmt.Fprintln(t, "STEP\tGROUPS\tOPEN\tNODES\tLEAVES\tMEAN REWARD\tZERO-VAR GROUPS\tCHECKPOINT")
		for _, s := range o.Steps {
			mean := meanReward(s.MeanReward)
			ck := "-"
			if s.Checkpoint {
				ck = "yes"
			}
			fmt.Fprintf(t, "%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\n", s.Step, s.Groups, s.OpenGroups, s.Nodes, s.Leaves, mean, s.ZeroVarianceGroups, ck)
		}
		t.Flush()
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "config")
	var buf bytes.Buffer
	if json.Indent(&buf, o.Config, "  ", "  ") == nil {
		fmt.Fprintf(w, "  %s\n", buf.String())
	} else {
		fmt.Fprintf(w, "  %s\n", o.Config)
	}
}

// stepProgress says how far the run is: the last completed step and, if a
// later step has groups, what of it is done.
func stepProgress(o showOutput) string {
	s := fmt.Sprintf("%d completed", o.LastStep)
	for _, row := range o.Steps {
		if row.Step > o.LastStep {
			state := "in progress"
			if o.Status != model.RunRunning {
				state = "not completed"
			}
			s += fmt.Sprintf("; step %d %s: %d of %d groups closed, %d active nodes",
				row.Step, state, row.Groups-row.OpenGroups, row.Groups, o.Frontier)
			break
		}
	}
	if o.DroppedStep > 0 {
		s += fmt.Sprintf("; steps 1-%d dropped from the file (patrdb retain: a lake holds them)", o.DroppedStep)
	}
	return s
}
