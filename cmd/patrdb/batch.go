package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/batch/sourcewire"
	"github.com/patrdb/patrdb/model"

	"github.com/spf13/cobra"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/internal/publish"
	"github.com/patrdb/patrdb/store"
)

type batchFlags struct {
	step, out, layout, groups, credit, norm string
	opts                                    batch.Options
	force                                   bool
}

func newBatchCommand(app *App) *cobra.Command {
	f := &batchFlags{}
	cmd := &cobra.Command{
		Use:   "batch RUN --step N --out FILE.safetensors [--layout rows|tree] [--credit repeat|mean|owner]",
		Short: "Write a step's training batch (token ids, loss mask, logprobs, advantages) as safetensors",
		Long: `batch writes the training batch of one step, read in one transaction, as a
safetensors file a trainer loads with safetensors, numpy or torch:

  rows   one row per leaf: the group's prompt tokens, then every turn on its
         path (action tokens, then observation tokens), shared prefix
         included; rows back to back, row_offsets delimits them.
  tree   every token once; segments (seg_offsets) name their parent segment
         (seg_parent), row_segment gives each row's last one.

Per token: input_ids, loss_mask (1 where a row trains the token),
old_logprobs and advantages (0 where the mask is 0), positions, the loss
coefficients coef_pos, coef_neg and loss_weight, policy_versions,
turn_index and turn_rewards (each turn's reward on its last action token).
A token shared by several leaves is credited by --credit:

  repeat  (default) every leaf trains its whole path with its advantage: a
          shared token is trained once per leaf below it — GRPO over the
          leaves' trajectories, the objective PaTR trains.
  mean    trained once, in the row of the smallest leaf id, with the mean
          advantage of the leaves below it.
  owner   trained once, in the row of the smallest leaf id, with that
          leaf's advantage (the files of earlier versions).

The clipped loss Σ −coef_pos·min(ρ, 1+ε) + coef_neg·max(ρ, 1−ε) over
either layout equals the rows loss, normalised by --norm (token-mean, or
seq-mean-token-mean). Rows are the leaves of the step's closed groups:
completed, pruned and truncated (each can be left out), failed nodes on
request; --min/--max-policy-version drop rows with turns sampled outside
that window. The file's __metadata__ says run, step, layout, credit,
loss_norm, groups, rows, the tree token ratio and the policy versions. The
file is written beside FILE and renamed into place, so an error leaves
nothing behind.` + remoteHelp,
		Args:              needArgs("RUN"),
		ValidArgsFunction: app.completeRuns,
	}
	rf := addRemoteFlags(app, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return app.batch(cmd.Context(), rf, args[0], f) }
	fl := cmd.Flags()
	fl.StringVar(&f.step, "step", "", "step `N` (required)")
	fl.StringVar(&f.out, "out", "", "the `FILE` to write (required)")
	fl.StringVar(&f.layout, "layout", "rows", "rows or tree")
	fl.StringVar(&f.credit, "credit", "repeat", "who trains a shared token: repeat, mean or owner")
	fl.StringVar(&f.norm, "norm", "token-mean", "the coefficients' normalisation: token-mean or seq-mean-token-mean")
	fl.StringVar(&f.groups, "groups", "", "only these groups of the step, comma-separated `IDS`")
	fl.BoolVar(&f.opts.ExcludePruned, "exclude-pruned", false, "leave out leaves pruned by routing")
	fl.BoolVar(&f.opts.ExcludeTruncated, "exclude-truncated", false, "leave out leaves cut at the turn cap")
	fl.BoolVar(&f.opts.IncludeFailed, "include-failed", false, "add failed nodes as rows with advantage 0")
	fl.Uint64Var(&f.opts.MinPolicyVersion, "min-policy-version", 0, "drop rows with a turn sampled by an older policy `VERSION`")
	fl.Uint64Var(&f.opts.MaxPolicyVersion, "max-policy-version", 0, "drop rows with a turn sampled by a newer policy `VERSION` (0: no bound)")
	fl.BoolVar(&f.force, "force", false, "replace FILE if it exists")
	_ = cmd.RegisterFlagCompletionFunc("layout", cobra.FixedCompletions([]string{"rows", "tree"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("credit", cobra.FixedCompletions([]string{"repeat", "mean", "owner"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("norm", cobra.FixedCompletions([]string{"token-mean", "seq-mean-token-mean"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// batchOutput is `batch --json`.
type batchOutput struct {
	Run                string   `json:"run"`
	Step               uint64   `json:"step"`
	Layout             string   `json:"layout"`
	Credit             string   `json:"credit"`
	Norm               string   `json:"loss_norm"`
	Out                string   `json:"out"`
	Bytes              int64    `json:"bytes"`
	Rows               int      `json:"rows"`
	Tokens             int      `json:"tokens"` // in the file's token arrays
	TokensMaterialised int64    `json:"tokens_materialised"`
	TokensPacked       int64    `json:"tokens_packed"`
	TreeTokenRatio     float64  `json:"tree_token_ratio"`
	LossTokens         int64    `json:"loss_tokens"` // trained tokens of the rows layout, the token-mean divisor
	Groups             []uint64 `json:"groups"`
	OpenGroups         []uint64 `json:"open_groups"` // still open, not in the batch
}

func (a *App) batch(ctx context.Context, rf *remoteFlags, runArg string, f *batchFlags) error {
	id, err := parseRunID(runArg)
	if err != nil {
		return err
	}
	if f.step == "" || f.out == "" {
		return usageErrorf("batch needs --step N and --out FILE")
	}
	step, err := parseID("--step", f.step)
	if err != nil {
		return err
	}
	opts := f.opts
	opts.Layout, opts.Credit, opts.Norm = batch.Layout(f.layout), batch.Credit(f.credit), batch.Norm(f.norm)
	if f.groups != "" {
		for _, s := range strings.Split(f.groups, ",") {
			g, err := parseID("--groups", strings.TrimSpace(s))
			if err != nil {
				return err
			}
			opts.Groups = append(opts.Groups, g)
		}
	}
	switch {
	case opts.Layout != batch.Rows && opts.Layout != batch.Tree:
		return usageErrorf("--layout %q: want rows or tree", f.layout)
	case opts.Credit != batch.Repeat && opts.Credit != batch.Mean && opts.Credit != batch.Owner:
		return usageErrorf("--credit %q: want repeat, mean or owner", f.credit)
	case opts.Norm != batch.TokenMean && opts.Norm != batch.SeqMeanTokenMean:
		return usageErrorf("--norm %q: want token-mean or seq-mean-token-mean", f.norm)
	case opts.MaxPolicyVersion != 0 && opts.MaxPolicyVersion < opts.MinPolicyVersion:
		return usageErrorf("--min-policy-version %d is above --max-policy-version %d", opts.MinPolicyVersion, opts.MaxPolicyVersion)
	}
	if _, err := os.Stat(f.out); err == nil && !f.force {
		return usageErrorf("--out %s exists: use --force to replace it", f.out)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	g, ctx := publish.Watch(ctx)
	defer g.Close()
	b, err := a.readBatch(ctx, rf, id, step, opts)
	if ctx.Err() != nil {
		return interrupted("batch", f.out)
	}
	if err != nil {
		return err
	}
	n, err := writeFileAtomic(g, f.out, f.force, b.WriteTo, func() { a.pause(ctx, "batch") })
	if errors.Is(err, publish.ErrExists) {
		return usageErrorf("--out %s exists: use --force to replace it", f.out)
	}
	if err != nil {
		return published(ctx, err, "batch", f.out, "--out")
	}
	out := batchOutput{Run: b.Run, Step: b.Step, Layout: string(b.Layout), Credit: string(b.Credit), Norm: string(b.Norm),
		Out: f.out, Bytes: n, Rows: b.Len(), Tokens: len(b.InputIDs), TokensMaterialised: b.TokensMaterialised,
		TokensPacked: b.TokensPacked, TreeTokenRatio: b.TreeTokenRatio(), LossTokens: b.LossTokens,
		Groups: nonNil(b.Groups), OpenGroups: nonNil(b.OpenGroups)}
	if a.json {
		return a.printJSON(out)
	}
	w := bufio.NewWriter(a.stdout)
	fmt.Fprintf(w, "wrote run %s step %d (%s layout, credit %s, %s) to %s: %s, %s tokens (%s trained), tree token ratio %s, %s\n",
		out.Run, out.Step, out.Layout, out.Credit, out.Norm, out.Out, plural(out.Rows, "row", "rows"), strconv.Itoa(out.Tokens),
		strconv.FormatInt(out.LossTokens, 10), strconv.FormatFloat(out.TreeTokenRatio, 'f', 2, 64), fmtBytes(out.Bytes))
	if len(out.OpenGroups) > 0 {
		fmt.Fprintf(w, "left out %s still open: %s\n", plural(len(out.OpenGroups), "group", "groups"), idList(out.OpenGroups))
	}
	return w.Flush()
}

// readBatch reads the batch from the file, or builds it from what the
// server that owns the file sends (client.ReadBatch: the step's source,
// far fewer bytes than the batch, on a server of API 1.8 or later).
func (a *App) readBatch(ctx context.Context, rf *remoteFlags, id string, step uint64, opts batch.Options) (*batch.Batch, error) {
	cl, err := a.remote(ctx, rf)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		b, err := cl.ReadBatch(ctx, id, step, opts)
		switch {
		case errors.Is(err, sourcewire.ErrFormat), errors.Is(err, batch.ErrSource), errors.Is(err, batch.ErrNotBatch):
			return nil, fmt.Errorf("server %s sent a damaged batch: %w", cl.Base, err)
		case err != nil:
			return nil, a.remoteError(cl, err)
		}
		return b, nil
	}
	db, err := a.openRead()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	b := new(batch.Batch)
	err = db.View(func(tx *store.Tx) error {
		// Only what the batch reads is checked, not the whole run.
		if err := tx.CheckReads(); err != nil {
			return a.damaged(err)
		}
		r, err := tx.Run(id)
		if errors.Is(err, model.ErrNotFound) {
			return a.runNotFound(tx, id)
		}
		if err == nil {
			err = batchdb.ReadInto(b, r, step, opts)
		}
		return a.damaged(err)
	})
	if errors.Is(err, model.ErrNotFound) {
		var ce *codeError
		if !errors.As(err, &ce) {
			err = notFoundErrorf("%v", err)
		}
	}
	return b, err
}

// writeFileAtomic writes path through a temporary file beside it, renamed
// into place once complete and synced (replacing a file there only when
// replace is set); g's stop signal removes it. written runs between the
// two (a test's pause point).
func writeFileAtomic(g *publish.Guard, path string, replace bool, write func(io.Writer) (int64, error), written func()) (int64, error) {
	o, err := g.Begin(path)
	if err != nil {
		return 0, err
	}
	defer o.Abort()
	f, err := o.Create(0o600)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	n, err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		written()
		err = o.Publish(replace)
	}
	return n, err
}
