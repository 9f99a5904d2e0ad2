package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/internal/frozenlake"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/store"
)

// demoFlags are the flags of `patrdb demo`.
type demoFlags struct {
	mode     string
	steps    int
	batch    int
	seed     int64
	seeds    int
	mapName  string
	slippery bool
	run      string
	resume   bool
	rubrics  bool
	budget   int
	discount float64
}

func newDemoCommand(app *App) *cobra.Command {
	f := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Train FrozenLake with PaTR tree rollouts (or GRPO) into the file",
		Long: `demo trains a tabular softmax policy on Gymnasium's FrozenLake with PaTR
tree rollouts (or plain GRPO, or both side by side at the same env-step
budget), writing every turn, score, routing decision, advantage and
checkpoint into the file. Kill it at any point and run it again with
--resume: it continues from the last commit with the policy it had.

--budget N gives every run exactly N env steps: once they are played the
environment refuses further moves (recorded as "not played", reward 0), and
the groups the cut reached are neither trained on nor counted. The goal pays
--discount^(moves-1), so a wasted move costs something; with --discount 1 a
bump into the edge is free and the greedy policy can loop on one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.budget > 0 && !cmd.Flags().Changed("steps") {
				f.steps = maxBudgetSteps
			}
			return app.demo(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.mode, "mode", "patr", "patr, grpo, or both (PaTR and GRPO at equal env-step budget over --seeds seeds)")
	fl.IntVar(&f.steps, "steps", 40, "training steps")
	fl.IntVar(&f.batch, "batch", 16, "tasks (rollout trees) per step")
	fl.Int64Var(&f.seed, "seed", 1, "seed of every random draw (policy sampling, slips, evaluation)")
	fl.IntVar(&f.seeds, "seeds", 3, "with --mode both: how many seeds to average over")
	fl.StringVar(&f.mapName, "map", "4x4", "4x4 or 8x8")
	fl.BoolVar(&f.slippery, "slippery", false, "Gymnasium's slippery ice: the intended move with probability 1/3")
	fl.StringVar(&f.run, "run", "", "run id (default: demo, or the first free demo-N)")
	fl.BoolVar(&f.resume, "resume", false, "continue the run --run (default demo) after a crash or with more --steps")
	fl.BoolVar(&f.rubrics, "rubrics", false, "shape rewards with the ARBOR rubric buffer")
	fl.IntVar(&f.budget, "budget", 0, "env steps each run plays, exactly: moves beyond it are refused and training stops (--steps then only caps the steps if given)")
	fl.Float64Var(&f.discount, "discount", frozenlake.DefaultTrainConfig("patr").Discount,
		"the goal pays discount^(moves-1); 1 pays 1 however long the path, which leaves wall bumps free")
	return cmd
}

// demoRow is one line of the final table (and of --json).
type demoRow struct {
	Run            string  `json:"run"`
	Mode           string  `json:"mode"`
	Seed           int64   `json:"seed"`
	Steps          uint64  `json:"steps"`
	FinalSuccess   float64 `json:"final_success"`
	SampledSuccess float64 `json:"sampled_success"`
	EnvSteps       int     `json:"env_steps"`
	Nodes          int     `json:"nodes"`
	Leaves         int     `json:"leaves"`
	Bytes          int64   `json:"bytes"`
	ZeroVariance   int     `json:"zero_variance_groups"`
	Unlocked       int     `json:"unlocked_groups"`
	PublicRubrics  int     `json:"public_rubrics"`
	RetiredRubrics int     `json:"retired_rubrics"`
	PolicyCalls    int     `json:"policy_calls"` // batch-policy calls this invocation made
	MaxBatch       int     `json:"max_batch"`    // the largest batch one call carried
}

type demoSummary struct {
	Mode        string  `json:"mode"`
	Runs        int     `json:"runs"`
	Mean        float64 `json:"mean_success"` // greedy
	Std         float64 `json:"sd_success"`
	SampledMean float64 `json:"mean_sampled_success"`
	SampledStd  float64 `json:"sd_sampled_success"`
	Budget      float64 `json:"mean_env_steps"`
}

type demoOutput struct {
	File    string        `json:"file"`
	Bytes   int64         `json:"file_bytes"`
	Runs    []demoRow     `json:"runs"`
	Summary []demoSummary `json:"summary,omitempty"`
}

func (a *App) demo(ctx context.Context, f *demoFlags) error {
	switch f.mode {
	case "patr", "grpo", "both":
	default:
		return usageErrorf("--mode %q: want patr, grpo or both", f.mode)
	}
	if f.mapName != "4x4" && f.mapName != "8x8" {
		return usageErrorf("--map %q: want 4x4 or 8x8", f.mapName)
	}
	if f.steps < 1 || f.batch < 1 || f.seeds < 1 {
		return usageErrorf("--steps, --batch and --seeds must be at least 1")
	}
	if f.budget < 0 {
		return usageErrorf("--budget %d: want a number of env steps (0: none)", f.budget)
	}
	if !(f.discount > 0 && f.discount <= 1) {
		return usageErrorf("--discount %v: want a number in (0, 1]", f.discount)
	}
	if f.run != "" && !store.ValidRunID(f.run) {
		return usageErrorf("--run %q: a run id is %s", f.run, store.RunIDRule)
	}
	if f.resume && f.mode == "both" {
		return usageErrorf("--resume continues one run; give --mode patr or grpo")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()

	db, err := a.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()

	progress := a.stdout
	if a.json {
		progress = io.Discard
	}
	var rows []demoRow
	if f.mode == "both" {
		rows, err = a.demoBoth(ctx, db, f, progress)
	} else {
		var row demoRow
		row, err = a.demoOne(ctx, db, f, f.mode, f.seed, f.run, 0, progress)
		rows = append(rows, row)
	}
	if err != nil {
		return err
	}
	out := demoOutput{File: a.dbPath, Runs: rows}
	if st, err := os.Stat(a.dbPath); err == nil {
		out.Bytes = st.Size()
	}
	if f.mode == "both" {
		out.Summary = []demoSummary{summarise("patr", rows), summarise("grpo", rows)}
	}
	if a.json {
		return a.printJSON(out)
	}
	a.printDemoTable(out, f)
	return nil
}

// maxBudgetSteps caps the steps of a run that --budget (or PaTR's spend
// under --mode both) ends: far more than any budget needs.
const maxBudgetSteps = 1 << 20

// demoOne trains one run and returns its row. budget > 0 is the exact
// number of env steps it plays.
func (a *App) demoOne(ctx context.Context, db *store.DB, f *demoFlags, mode string, seed int64, run string, budget int, progress io.Writer) (demoRow, error) {
	cfg := frozenlake.DefaultTrainConfig(mode)
	cfg.Steps, cfg.Batch, cfg.Seed, cfg.Map, cfg.Slippery = f.steps, f.batch, seed, f.mapName, f.slippery
	if f.rubrics {
		cfg.EnableRubrics()
	}
	cfg.Tree.Seed = seed
	cfg.Discount = f.discount
	cfg.EnvStepBudget = f.budget
	if budget > 0 && f.budget == 0 {
		// GRPO at PaTR's spend: as many (smaller) steps as that takes.
		cfg.EnvStepBudget, cfg.Steps = budget, maxBudgetSteps
	}
	var err error
	switch {
	case run != "":
		cfg.Run = run
	case f.resume:
		cfg.Run = "demo"
	default:
		if cfg.Run, err = freeRunID(db, "demo"); err != nil {
			return demoRow{}, err
		}
	}
	tr, err := frozenlake.NewTrainer(db, cfg, progress)
	if err != nil {
		return demoRow{}, usageErrorf("%v", err)
	}
	tr.ShaperFor = frozenlake.RubricShaper
	length := fmt.Sprintf("%d steps", cfg.Steps)
	if cfg.EnvStepBudget > 0 {
		length = fmt.Sprintf("%d env steps", cfg.EnvStepBudget)
		if cfg.Steps < maxBudgetSteps {
			length += fmt.Sprintf(" (at most %d steps)", cfg.Steps)
		}
	}
	fmt.Fprintf(progress, "run %s: %s on FrozenLake %s%s, %s × %d tasks, seed %d\n",
		cfg.Run, mode, cfg.Map, map[bool]string{true: " (slippery)", false: ""}[cfg.Slippery], length, cfg.Batch, seed)
	rep, err := tr.Train(ctx, f.resume)
	if errors.Is(err, frozenlake.ErrRunExists) {
		return demoRow{}, usageErrorf("%v", err)
	}
	if err != nil {
		return demoRow{}, err
	}
	return demoRow{Run: rep.Run, Mode: rep.Mode, Seed: seed, Steps: rep.Steps, FinalSuccess: rep.FinalSuccess, SampledSuccess: rep.SampledSuccess,
		EnvSteps: rep.EnvSteps, Nodes: rep.Nodes, Leaves: rep.Leaves, Bytes: rep.Bytes,
		ZeroVariance: rep.ZeroVariance, Unlocked: rep.Unlocked, PublicRubrics: rep.PublicRubrics, RetiredRubrics: rep.RetiredRubrics,
		PolicyCalls: rep.PolicyCalls, MaxBatch: rep.MaxBatch}, nil
}

// demoBoth runs PaTR, then GRPO with PaTR's env-step budget, for each seed.
func (a *App) demoBoth(ctx context.Context, db *store.DB, f *demoFlags, progress io.Writer) ([]demoRow, error) {
	base := f.run
	if base == "" {
		var err error
		if base, err = freeRunID(db, "cmp"); err != nil {
			return nil, err
		}
	}
	var rows []demoRow
	for i := 0; i < f.seeds; i++ {
		seed := f.seed + int64(i)
		p, err := a.demoOne(ctx, db, f, "patr", seed, fmt.Sprintf("%s-patr-s%d", base, seed), 0, progress)
		if err != nil {
			return nil, err
		}
		g, err := a.demoOne(ctx, db, f, "grpo", seed, fmt.Sprintf("%s-grpo-s%d", base, seed), p.EnvSteps, progress)
		if err != nil {
			return nil, err
		}
		rows = append(rows, p, g)
	}
	return rows, nil
}

// freeRunID returns prefix, or prefix-2, prefix-3, ... whichever is free.
func freeRunID(db *store.DB, prefix string) (string, error) {
	var id string
	err := db.View(func(tx *store.Tx) error {
		for i := 1; ; i++ {
			id = prefix
			if i > 1 {
				id = prefix + "-" + strconv.Itoa(i)
			}
			if _, err := tx.Run(id); errors.Is(err, model.ErrNotFound) {
				return nil
			} else if err != nil {
				return err
			}
		}
	})
	return id, err
}

func summarise(mode string, rows []demoRow) demoSummary {
	s := demoSummary{Mode: mode}
	var greedy, sampled []float64
	for _, r := range rows {
		if r.Mode == mode {
			greedy = append(greedy, r.FinalSuccess)
			sampled = append(sampled, r.SampledSuccess)
			s.Budget += float64(r.EnvSteps)
		}
	}
	s.Runs = len(greedy)
	if s.Runs == 0 {
		return s
	}
	s.Budget /= float64(s.Runs)
	s.Mean, s.Std = frozenlake.MeanSD(greedy)
	s.SampledMean, s.SampledStd = frozenlake.MeanSD(sampled)
	return s
}

func (a *App) printDemoTable(out demoOutput, f *demoFlags) {
	fmt.Fprintln(a.stdout)
	tw := newTable(a.stdout)
	header := "run\tmode\tseed\tsteps\tsuccess: sampled / greedy (1000 ep.)\tenv steps\tnodes\tleaves\tbytes\tzero-var groups"
	if f.rubrics {
		header += "\tunlocked by rubrics\tpublic rubrics\tretired rubrics"
	}
	fmt.Fprintln(tw, header)
	for _, r := range out.Runs {
		line := fmt.Sprintf("%s\t%s\t%d\t%d\t%.3f / %.3f\t%d\t%d\t%d\t%s\t%d", r.Run, r.Mode, r.Seed, r.Steps, r.SampledSuccess, r.FinalSuccess,
			r.EnvSteps, r.Nodes, r.Leaves, fmtBytes(r.Bytes), r.ZeroVariance)
		if f.rubrics {
			share := 0.0
			if r.ZeroVariance > 0 {
				share = float64(r.Unlocked) / float64(r.ZeroVariance)
			}
			line += fmt.Sprintf("\t%d (%.0f%%)\t%d\t%d", r.Unlocked, 100*share, r.PublicRubrics, r.RetiredRubrics)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	for _, s := range out.Summary {
		fmt.Fprintf(a.stdout, "%s: success sampled %.3f ± %.3f, greedy %.3f ± %.3f (mean ± sd over %d seeds) at %.0f env steps\n",
			s.Mode, s.SampledMean, s.SampledStd, s.Mean, s.Std, s.Runs, s.Budget)
	}
	fmt.Fprintf(a.stdout, "\nwrote %s (%s). Look inside: patrdb runs; patrdb tree %s latest; patrdb check\n",
		out.File, fmtBytes(out.Bytes), out.Runs[len(out.Runs)-1].Run)
}
