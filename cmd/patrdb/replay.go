package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/replay"
	"github.com/patrdb/patrdb/server"
	"github.com/patrdb/patrdb/store"
	"github.com/patrdb/patrdb/tree"
)

type replayFlags struct {
	from, until string
	whatIf      string
	step, group string
}

func newReplayCommand(app *App) *cobra.Command {
	f := &replayFlags{}
	cmd := &cobra.Command{
		Use:   "replay RUN",
		Short: "The event log and the state after any event, or what-if routing on the recorded scores",
		Long: `replay prints a run's event log — every mutation in order, one line each —
and then the run as it stood after the last event printed: groups, nodes by
status, the frontier, the rubric pools. --until SEQ stops there (the state
at that point: what the tree looked like mid-step), --from SEQ starts later.

--what-if delta=0.3,m=3,top=1,rule=median,max_active=8 instead re-runs the
routing over the recorded process scores with those parameters changed
(keys: delta, m, top, rule, max_active) and lists, per interval, the
decisions that differ: branches pruned earlier, expanded instead, kept
instead, or expanded into a different number of children. Only the part of
each tree the run sampled is followed; branches the new config would have
created but the run never sampled are counted as unobserved, never made up.
The env steps line is what the config would still have spent on the
recorded nodes. --step and --group narrow the analysis. --what-if reads the
file itself: it is not available through a server.` + remoteHelp,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if cmd.Flags().Changed("what-if") {
			if cmd.Flags().Changed("until") || cmd.Flags().Changed("from") {
				return usageErrorf("--what-if analyses the whole record; it cannot be combined with --from or --until")
			}
			return app.replayWhatIf(rf, args[0], f)
		}
		if cmd.Flags().Changed("step") || cmd.Flags().Changed("group") {
			return usageErrorf("--step and --group select what --what-if analyses")
		}
		return app.replayLog(rf, args[0], f)
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "first event to print (`SEQ`, default 1)")
	fl.StringVar(&f.until, "until", "", "last event to print and the point the state is shown at (`SEQ`, default the last)")
	fl.StringVar(&f.whatIf, "what-if", "", "re-route the recorded scores with `k=v,...` changed (delta, m, top, rule, max_active)")
	fl.StringVar(&f.step, "step", "", "with --what-if: only step `N`")
	fl.StringVar(&f.group, "group", "", "with --what-if: only group `ID`")
	return cmd
}

// replayOutput is `replay --json` without --what-if. It is written as a
// stream (replayLog), field by field in this order; tests decode it.
type replayOutput struct {
	Run    string            `json:"run"`
	From   uint64            `json:"from"`
	Until  uint64            `json:"until"`
	Last   uint64            `json:"last"` // the run's last event
	Events []replayEventJSON `json:"events"`
	State  replayStateJSON   `json:"state"`
}

// replayEventJSON is one event of `replay --json`: the event as the API's
// events endpoint shows it, with what it did in words.
type replayEventJSON struct {
	api.EventJSON
	Summary string `json:"summary"`
}

// replayStateJSON is the run after event Seq.
type replayStateJSON struct {
	Seq           uint64         `json:"seq"`
	Status        string         `json:"status"`
	LastStep      uint64         `json:"last_step"`
	Groups        int            `json:"groups"`
	OpenGroups    int            `json:"open_groups"`
	Nodes         int            `json:"nodes"`
	NodesByStatus map[string]int `json:"nodes_by_status"`
	Frontier      []uint64       `json:"frontier"`
	RubricsByPool map[string]int `json:"rubrics_by_pool"`
	Advantages    int            `json:"advantages"`
	Checkpoints   int            `json:"checkpoints"`
	OpenTrees     []openTreeJSON `json:"open_groups_detail"`
}

// openTreeJSON is a group still growing at that point.
type openTreeJSON struct {
	Group    uint64 `json:"group"`
	Step     uint64 `json:"step"`
	Interval int    `json:"interval"` // intervals committed
	Nodes    int    `json:"nodes"`
	Active   int    `json:"active"`
}

func parseSeq(flag, s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, usageErrorf("--%s %q: want a positive event sequence number", flag, s)
	}
	return n, nil
}

// replayError maps the library's input errors to usage errors (exit 2).
func replayError(err error) error {
	switch {
	case errors.Is(err, replay.ErrSeqRange), errors.Is(err, replay.ErrWhatIfKey), errors.Is(err, replay.ErrWhatIfValue):
		return usageErrorf("%v", err)
	}
	return err
}

func (a *App) replayLog(rf *remoteFlags, runArg string, f *replayFlags) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	from, err := parseSeq("from", f.from)
	if err != nil {
		return err
	}
	until, err := parseSeq("until", f.until)
	if err != nil {
		return err
	}
	// The log is streamed, text or JSON, so memory stays flat however long
	// it is (through a server, page by page); only the state it folds into
	// is kept.
	w := bufio.NewWriter(a.stdout)
	err = a.readRun(rf, id, func(r runReader) error {
		last, err := r.LastSeq()
		if err != nil {
			return err
		}
		if until == 0 {
			until = last
		}
		if from == 0 {
			from = 1
		}
		if until > last {
			return usageErrorf("--until %d: run %q ends at event %d", until, id, last)
		}
		if from > until {
			return usageErrorf("--from %d comes after --until %d", from, until)
		}
		seqWidth := max(len(strconv.FormatUint(until, 10)), len("SEQ"))
		if a.json {
			fmt.Fprintf(w, "{\n  \"run\": %s,\n  \"from\": %d,\n  \"until\": %d,\n  \"last\": %d,\n  \"events\": [", jsonString(id), from, until, last)
		} else {
			fmt.Fprintf(w, "%*s  %-24s  %-14s %5s %5s %6s %6s  %s\n", seqWidth, "SEQ", "TIME", "KIND", "STEP", "GROUP", "NODE", "RUBRIC", "WHAT")
		}
		// The state needs every event up to --until; the log prints from
		// --from. One pass does both.
		st := replay.NewState(id)
		first := true
		err = r.events(1, until, func(e logEvent) error {
			if err := st.Apply(e.Event); err != nil {
				return err
			}
			if e.Seq < from {
				return nil
			}
			view := eventView(e)
			if !a.json {
				fmt.Fprintf(w, "%*d  %-24s  %-14s %5s %5s %6s %6s  %s\n", seqWidth, e.Seq, fmtTime(e.Time), e.Kind, idOrDash(e.Step),
					idOrDash(e.Group), idOrDash(e.Node), idOrDash(e.Rubric), eventSummary(e, view))
				return nil
			}
			b, err := json.MarshalIndent(replayEventJSON{EventJSON: view, Summary: eventSummary(e, view)}, "    ", "  ")
			if err != nil {
				return err
			}
			if !first {
				w.WriteByte(',')
			}
			first = false
			w.WriteString("\n    ")
			w.Write(b)
			return nil
		})
		if err != nil {
			return replayError(err)
		}
		state := stateSummary(st)
		if a.json {
			b, err := json.MarshalIndent(state, "  ", "  ")
			if err != nil {
				return err
			}
			if !first {
				w.WriteString("\n  ")
			}
			fmt.Fprintf(w, "],\n  \"state\": %s\n}\n", b)
			return nil
		}
		writeStateSummary(w, id, state)
		return nil
	})
	if err != nil {
		return err
	}
	return w.Flush()
}

// jsonString quotes s as printJSON would (no HTML escaping).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func idOrDash(x uint64) string {
	if x == 0 {
		return "-"
	}
	return strconv.FormatUint(x, 10)
}

func stateSummary(st *replay.State) replayStateJSON {
	s := replayStateJSON{Seq: st.Seq, Status: string(st.Info.Status), LastStep: st.Info.LastStep, Groups: len(st.Groups),
		Nodes: len(st.Nodes), NodesByStatus: map[string]int{}, RubricsByPool: map[string]int{},
		Frontier: nonNil(st.Frontier()), Advantages: len(st.Advantages), Checkpoints: len(st.Checkpoints),
		OpenTrees: []openTreeJSON{}}
	for _, ns := range nodeStatuses {
		s.NodesByStatus[string(ns)] = 0
	}
	for _, p := range rubricPools {
		s.RubricsByPool[string(p)] = 0
	}
	for _, n := range st.Nodes {
		s.NodesByStatus[string(n.Status)]++
	}
	for _, rb := range st.Rubrics {
		s.RubricsByPool[string(rb.Pool)]++
	}
	for _, g := range st.GroupList() {
		if g.Status != model.GroupOpen {
			continue
		}
		s.OpenGroups++
		o := openTreeJSON{Group: g.ID, Step: g.Step, Interval: g.Interval}
		for _, n := range st.GroupNodes(g.ID) {
			o.Nodes++
			if n.Status == model.NodeActive {
				o.Active++
			}
		}
		s.OpenTrees = append(s.OpenTrees, o)
	}
	return s
}

func writeStateSummary(w io.Writer, run string, s replayStateJSON) {
	fmt.Fprintf(w, "\nrun %s after event %d: %s, last completed step %d\n", run, s.Seq, s.Status, s.LastStep)
	fmt.Fprintf(w, "  groups     %d (%d open)\n", s.Groups, s.OpenGroups)
	fmt.Fprintf(w, "  nodes      %d:", s.Nodes)
	for _, ns := range nodeStatuses {
		if n := s.NodesByStatus[string(ns)]; n > 0 {
			fmt.Fprintf(w, " %s %d", ns, n)
		}
	}
	fmt.Fprintln(w)
	for _, o := range s.OpenTrees {
		fmt.Fprintf(w, "  open       group %d of step %d: %s committed, %s, %d active\n", o.Group, o.Step,
			plural(o.Interval, "interval", "intervals"), plural(o.Nodes, "node", "nodes"), o.Active)
	}
	fmt.Fprintf(w, "  frontier   %s\n", idList(s.Frontier))
	fmt.Fprintf(w, "  rubrics   ")
	for _, p := range rubricPools {
		fmt.Fprintf(w, " %s %d", p, s.RubricsByPool[string(p)])
	}
	fmt.Fprintf(w, "\n  advantages %d, checkpoints %d\n", s.Advantages, s.Checkpoints)
}

func idList(ids []uint64) string {
	if len(ids) == 0 {
		return "(none)"
	}
	const most = 20
	s := ""
	for i, id := range ids {
		if i == most {
			return fmt.Sprintf("%s … (%d in all)", s, len(ids))
		}
		if i > 0 {
			s += " "
		}
		s += strconv.FormatUint(id, 10)
	}
	return s
}

// eventSummary is one event in words; view is eventView(e).
func eventSummary(e logEvent, view api.EventJSON) string {
	switch rec := e.Record.(type) {
	case *model.Run:
		if e.Kind == model.EvRunCreate {
			return "run created"
		}
		return fmt.Sprintf("run %s, last completed step %d", rec.Status, rec.LastStep)
	case *model.Group:
		switch e.Kind {
		case model.EvGroupOpen:
			return fmt.Sprintf("group opened: task %s", truncate(rec.Task, 40))
		case model.EvGroupClose:
			return fmt.Sprintf("group closed with %s", plural(len(rec.Roots), "root", "roots"))
		}
		return fmt.Sprintf("%s committed", plural(rec.Interval, "interval", "intervals"))
	case *model.Node:
		return nodeSummary(e.Kind, rec)
	case *model.TurnsPayload:
		return fmt.Sprintf("%s written (%d own)", turnRange(rec.From, rec.Count), rec.Turns)
	case *model.Advantage:
		zv := ""
		if rec.ZeroVariance {
			zv = ", zero variance"
			if rec.Unlocked() {
				zv += " (unlocked by rubrics)"
			}
		}
		return fmt.Sprintf("advantage %s of leaf %d (outcome %s, total %s)%s", fmtSigned(rec.Advantage), rec.Leaf, fmtNum(rec.Outcome), fmtNum(rec.Total), zv)
	case *model.Rubric:
		switch e.Kind {
		case model.EvRubricPut:
			return fmt.Sprintf("rubric added to %s: %s", rec.Pool, truncate(rec.Text, 40))
		case model.EvRubricMove:
			switch rec.Pool {
			case model.PoolMerged:
				return fmt.Sprintf("rubric merged into %d", rec.MergedInto)
			case model.PoolRetired:
				return fmt.Sprintf("rubric retired at step %d: %s", rec.RetireStep, rec.RetireReason)
			}
			return "rubric moved to " + string(rec.Pool)
		}
		return fmt.Sprintf("rubric updated: %d activations, support %d", rec.Usage.Activations, rec.Support)
	case *store.Reply:
		return fmt.Sprintf("server reply %d to %s", rec.Status, rec.Op)
	case *model.Checkpoint:
		if rec.URI != "" {
			return fmt.Sprintf("checkpoint of step %d: %s", rec.Step, rec.URI)
		}
		return fmt.Sprintf("checkpoint of step %d: %s inline", rec.Step, fmtBytes(int64(len(rec.Inline))))
	}
	// A kind defined above the store: its payload, as far as it fits.
	payload, err := json.Marshal(view.Payload)
	if err != nil {
		payload = []byte("null")
	}
	if string(payload) == "null" {
		return "no payload"
	}
	return truncate(string(payload), 72)
}

func nodeSummary(kind model.EventKind, n *model.Node) string {
	switch kind {
	case model.EvNodeAdd:
		if n.Parent == 0 {
			return fmt.Sprintf("root branch #%d", n.Ordinal)
		}
		return fmt.Sprintf("child #%d of %d, forks after its turn %d (path turn %d)", n.Ordinal, n.Parent, n.Fork, n.Base)
	case model.EvNodeScore:
		if s, ok := lastScore(*n); ok {
			return fmt.Sprintf("i%d score %s at path turn %d", s.Interval, fmtScore(s.Value), s.Turn)
		}
	case model.EvNodeRoute:
		if len(n.Decisions) > 0 {
			d := n.Decisions[0]
			for _, x := range n.Decisions {
				if x.Interval >= d.Interval {
					d = x
				}
			}
			return fmt.Sprintf("i%d %s", d.Interval, decisionText(d))
		}
	case model.EvNodeReward:
		return "reward " + fmtNum(n.Reward)
	case model.EvNodeEnvState:
		return fmt.Sprintf("env state (%d bytes)", len(n.EnvState))
	}
	return "status " + string(n.Status)
}

// eventView is the event as the API's events endpoint shows it: from the
// file, decoded as the server decodes it; from a server, as it sent it.
func eventView(e logEvent) api.EventJSON {
	if e.sent != nil {
		return api.EventJSON{Event: e.Event.Event, Payload: e.sent}
	}
	return server.EventView(e.Event.Event)
}

func (a *App) replayWhatIf(rf *remoteFlags, runArg string, f *replayFlags) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	o, err := replay.ParseWhatIf(f.whatIf)
	if err != nil {
		return replayError(err)
	}
	var opts replay.WhatIfOptions
	opts.Overrides = o
	if f.step != "" {
		if opts.Step, err = parseID("--step", f.step); err != nil {
			return err
		}
	}
	if f.group != "" {
		if opts.Group, err = parseID("--group", f.group); err != nil {
			return err
		}
	}
	var rep *replay.WhatIfReport
	err = a.readRun(rf, id, func(r runReader) error {
		rep, err = r.whatIf(opts)
		if errors.Is(err, model.ErrNotFound) {
			return notFoundErrorf("no group matches --step %s --group %s in run %q", orAny(f.step), orAny(f.group), id)
		}
		return replayError(err)
	})
	if err != nil {
		return err
	}
	// Only the intervals where a decision differs are worth printing.
	out := *rep
	out.Intervals = []replay.IntervalReport{}
	for _, iv := range rep.Intervals {
		if len(iv.Diffs) > 0 {
			out.Intervals = append(out.Intervals, iv)
		}
	}
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	writeWhatIf(w, out)
	return w.Flush()
}

func orAny(s string) string {
	if s == "" {
		return "any"
	}
	return s
}

func configText(c tree.Config) string {
	return fmt.Sprintf("delta %s, m %d, top %d, rule %s, max_active %d", fmtNum(c.Delta), c.M, c.TopExpand, c.PruneRule, c.MaxActive)
}

func writeWhatIf(w io.Writer, o replay.WhatIfReport) {
	what := o.Overrides
	if what == "" {
		what = "(no change)"
	}
	base := "recorded"
	if !o.BaseRecorded {
		base = "defaults: the run recorded no tree config"
	}
	fmt.Fprintf(w, "what-if %s on run %s\n", what, o.Run)
	fmt.Fprintf(w, "  base    %s (%s)\n  config  %s\n", configText(o.Base), base, configText(o.Config))
	for _, iv := range o.Intervals {
		partial := ""
		if iv.Partial {
			partial = ", partial: unobserved branches were active"
		}
		fmt.Fprintf(w, "\nstep %d group %d interval %d: %d of %d recorded branches routed%s\n", iv.Step, iv.Group, iv.Interval, iv.Routed, iv.Recorded, partial)
		t := newTable(w)
		for _, d := range iv.Diffs {
			fmt.Fprintf(t, "  node %d\t%s\t%s\t→ %s", d.Node, d.Change, decisionText(d.Recorded), decisionText(d.WhatIf))
			if d.Unobserved > 0 {
				fmt.Fprintf(t, "\t+%d unobserved", d.Unobserved)
			}
			fmt.Fprintln(t)
		}
		t.Flush()
	}
	t := o.Totals
	fmt.Fprintf(w, "\n%s over %s: %d of %d decisions differ", plural(t.Intervals, "interval", "intervals"), plural(t.Groups, "group", "groups"), t.Differ, t.Decisions)
	if t.Differ > 0 {
		fmt.Fprintf(w, " (%d pruned earlier, %d expanded instead, %d survived instead, %d other child count, %d other rule)",
			t.PrunedEarlier, t.ExpandedInstead, t.SurvivedInstead, t.Children, t.RuleOnly)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "recorded nodes reached: %d of %d; unobserved branches: %d", t.NodesReached, t.NodesRecorded, t.Unobserved)
	if t.PartialIntervals > 0 {
		fmt.Fprintf(w, " (%s partial)", plural(t.PartialIntervals, "interval", "intervals"))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "env steps on the recorded tree: %d of %d recorded", t.EnvSteps, t.EnvStepsRecorded)
	if t.Unobserved > 0 {
		fmt.Fprint(w, ", plus whatever the unobserved branches would have taken")
	}
	fmt.Fprintln(w)
}
