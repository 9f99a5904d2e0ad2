package main

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/patrdb/patrdb/internal/frozenlake"
	"github.com/patrdb/patrdb/internal/publish"
	"github.com/patrdb/patrdb/store"
)

type plotFlags struct {
	out      string
	size     string
	episodes int
}

func newPlotCommand(app *App) *cobra.Command {
	f := &plotFlags{}
	cmd := &cobra.Command{
		Use:   "plot RUN... --out FILE.svg|png",
		Short: "Draw demo runs' learning curves: success and zero-variance groups against env steps",
		Long: `plot draws the learning curves of runs written by patrdb demo, read back
from the file: on top the success of the policy each step checkpointed
against the env steps played so far (solid: actions sampled, as the rollouts
act; dashed: greedy), below the share of each step's groups with zero
variance (all rewards equal: plain GRPO learns nothing from them).

Runs of the same setup (mode, plus rubrics) are seeds of it: each setup is
drawn as the mean over its runs with a band of ± one standard deviation,
each run interpolated between its own steps, up to the smallest env-step
count any of its runs reached (runs trained with the same --budget all end
there). Every checkpoint is evaluated afresh over --episodes episodes with
the demo's evaluation seed, so a run's last point is the demo's closing
figure.

The format follows the name of --out (.svg or .png). The image is written to
a temporary file beside it and renamed into place, so a failure leaves
nothing behind. plot reads the file itself, not a server.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("plot takes RUN... (one or more run ids), got none")
			}
			return nil
		},
		ValidArgsFunction: app.completeRuns,
		RunE:              func(_ *cobra.Command, args []string) error { return app.plot(args, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "the image to write, `FILE`.svg or FILE.png (required)")
	fl.StringVar(&f.size, "size", "960x720", "image size in pixels, `WxH`")
	fl.IntVar(&f.episodes, "episodes", 1000, "evaluation episodes per checkpoint")
	return cmd
}

// plotOutput is `plot --json`.
type plotOutput struct {
	Out    string          `json:"out"`
	Format string          `json:"format"`
	Width  int             `json:"width"`
	Height int             `json:"height"`
	Setups []plotSetupJSON `json:"setups"`
}

type plotSetupJSON struct {
	Label             string   `json:"label"`
	Runs              []string `json:"runs"`
	EnvSteps          float64  `json:"env_steps"` // where the curves end
	SampledMean       float64  `json:"sampled_success_mean"`
	SampledSD         float64  `json:"sampled_success_sd"`
	GreedyMean        float64  `json:"greedy_success_mean"`
	GreedySD          float64  `json:"greedy_success_sd"`
	ZeroVarianceMean  float64  `json:"zero_variance_groups_mean"`
	ZeroVarianceSD    float64  `json:"zero_variance_groups_sd"`
	UnlockedShareMean float64  `json:"unlocked_share_mean"`
	UnlockedShareSD   float64  `json:"unlocked_share_sd"`
}

// parseSize reads "WxH" in pixels.
func parseSize(s string) (int, int, error) {
	w, h, ok := strings.Cut(s, "x")
	wi, err1 := strconv.Atoi(w)
	hi, err2 := strconv.Atoi(h)
	if !ok || err1 != nil || err2 != nil || wi < 200 || hi < 200 || wi > 8000 || hi > 8000 {
		return 0, 0, usageErrorf("--size %q: want WxH in pixels, each 200-8000", s)
	}
	return wi, hi, nil
}

func (a *App) plot(args []string, f *plotFlags) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(f.out), "."))
	switch {
	case f.out == "":
		return usageErrorf("plot needs --out FILE.svg or --out FILE.png")
	case format != "svg" && format != "png":
		return usageErrorf("--out %q: the name must end in .svg or .png", f.out)
	case f.episodes < 1:
		return usageErrorf("--episodes %d: want at least 1", f.episodes)
	}
	w, h, err := parseSize(f.size)
	if err != nil {
		return err
	}
	ids := make([]string, len(args))
	for i, arg := range args {
		if ids[i], err = parseRunID(arg); err != nil {
			return err
		}
	}
	db, err := a.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	var curves []*frozenlake.Curve
	err = db.View(func(tx *store.Tx) error {
		for _, id := range ids {
			r, err := a.lookupRun(tx, id, store.CheckPages) // the curve reads every group
			if err != nil {
				return err
			}
			c, err := frozenlake.LoadCurve(r, f.episodes)
			if errors.Is(err, frozenlake.ErrNotDemoRun) {
				return usageErrorf("run %q was not written by patrdb demo: plot draws demo runs' learning curves", id)
			}
			if err != nil {
				return err
			}
			if len(c.Points) < 2 {
				return usageErrorf("run %q has no completed step to plot", id)
			}
			curves = append(curves, c)
		}
		return nil
	})
	if err != nil {
		return err
	}
	bands := frozenlake.Bands(curves)
	if err := writeImage(f.out, format, w, h, drawCurves(curves, bands)); err != nil {
		return err
	}
	out := plotOutput{Out: f.out, Format: format, Width: w, Height: h}
	for _, b := range bands {
		last := func(ps []frozenlake.BandPoint) frozenlake.BandPoint { return ps[len(ps)-1] }
		out.Setups = append(out.Setups, plotSetupJSON{Label: b.Label, Runs: b.Runs, EnvSteps: b.End(),
			SampledMean: last(b.Sampled).Mean, SampledSD: last(b.Sampled).SD,
			GreedyMean: last(b.Greedy).Mean, GreedySD: last(b.Greedy).SD,
			ZeroVarianceMean: b.TotalZeroVariance.Mean, ZeroVarianceSD: b.TotalZeroVariance.SD,
			UnlockedShareMean: b.UnlockedShare.Mean, UnlockedShareSD: b.UnlockedShare.SD})
	}
	if a.json {
		return a.printJSON(out)
	}
	fmt.Fprintf(a.stdout, "wrote %s (%d×%d px): %s, %d evaluation episodes per checkpoint\n",
		out.Out, w, h, plural(len(curves), "run", "runs"), f.episodes)
	t := newTable(a.stdout)
	fmt.Fprintln(t, "SETUP\tRUNS\tENV STEPS\tSUCCESS SAMPLED\tGREEDY\tZERO-VAR GROUPS\tUNLOCKED BY RUBRICS")
	for _, s := range out.Setups {
		fmt.Fprintf(t, "%s\t%d\t%.0f\t%.3f ± %.3f\t%.3f ± %.3f\t%.1f ± %.1f\t%.0f%% ± %.0f%%\n", s.Label, len(s.Runs), s.EnvSteps,
			s.SampledMean, s.SampledSD, s.GreedyMean, s.GreedySD, s.ZeroVarianceMean, s.ZeroVarianceSD,
			100*s.UnlockedShareMean, 100*s.UnlockedShareSD)
	}
	return t.Flush()
}

// setupColors are the setups' colours in the order they first appear.
var setupColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // purple
	{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown
}

func setupColor(i int) color.RGBA { return setupColors[i%len(setupColors)] }

// drawCurves lays out the two panels: success above, zero-variance groups
// below, sharing the env-step axis.
func drawCurves(curves []*frozenlake.Curve, bands []frozenlake.Band) [][]*plot.Plot {
	top, bottom := plot.New(), plot.New()
	top.Title.Text = curvesTitle(curves)
	top.Y.Label.Text = "success (solid: sampled, dashed: greedy)"
	top.Y.Min, top.Y.Max = 0, 1
	bottom.Y.Label.Text = "share of a step's groups with zero variance"
	bottom.X.Label.Text = "env steps"
	bottom.Y.Min, bottom.Y.Max = 0, 1
	top.Legend.Top, top.Legend.Left = true, true
	for i, b := range bands {
		c := setupColor(i)
		name := fmt.Sprintf("%s (%s)", b.Label, plural(len(b.Runs), "run", "runs"))
		addBand(top, b.Sampled, c, name, false)
		addBand(top, b.Greedy, c, "", true)
		addBand(bottom, b.ZeroVariance, c, "", false)
	}
	bottom.X.Min, bottom.X.Max = 0, top.X.Max
	top.X.Min = 0
	return [][]*plot.Plot{{top}, {bottom}}
}

// addBand draws a mean line with a translucent ± sd band (no band for a
// dashed line, which is drawn over its solid sibling's).
func addBand(p *plot.Plot, pts []frozenlake.BandPoint, c color.RGBA, name string, dashed bool) {
	if len(pts) == 0 {
		return
	}
	mean := make(plotter.XYs, len(pts))
	hull := make(plotter.XYs, 0, 2*len(pts))
	for i, q := range pts {
		mean[i] = plotter.XY{X: q.EnvSteps, Y: q.Mean}
		hull = append(hull, plotter.XY{X: q.EnvSteps, Y: q.Mean + q.SD})
	}
	for i := len(pts) - 1; i >= 0; i-- {
		hull = append(hull, plotter.XY{X: pts[i].EnvSteps, Y: pts[i].Mean - pts[i].SD})
	}
	if !dashed {
		if poly, err := plotter.NewPolygon(hull); err == nil {
			poly.Color = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 0x40} // RGBA is premultiplied
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
	}
	line, err := plotter.NewLine(mean)
	if err != nil {
		return // only non-finite values, which the figures never hold
	}
	line.Color = c
	line.Width = vg.Points(2)
	if dashed {
		line.Width = vg.Points(1.2)
		line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	p.Add(line)
	if name != "" {
		p.Legend.Add(name, line)
	}
}

// curvesTitle names what the runs share: the map, the ice and whether the
// reward was discounted.
func curvesTitle(curves []*frozenlake.Curve) string {
	maps := map[string]bool{}
	for _, c := range curves {
		name := "FrozenLake " + c.Config.Map
		if c.Config.Slippery {
			name += " slippery"
		}
		if g := c.Config.Discount; g <= 0 || g >= 1 {
			name += ", undiscounted"
		}
		maps[name] = true
	}
	if len(maps) != 1 {
		return "FrozenLake"
	}
	for name := range maps {
		return name
	}
	return ""
}

// writeImage renders the panels at w×h pixels (96 dpi) and writes them to
// path through a temporary file renamed into place (package publish): a
// stop signal removes it, and leaves path as it was.
func writeImage(path, format string, w, h int, panels [][]*plot.Plot) (err error) {
	const dpi = 96
	width, height := vg.Length(w)*vg.Inch/dpi, vg.Length(h)*vg.Inch/dpi
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	var dc draw.Canvas
	if format == "svg" {
		c := vgsvg.New(width, height)
		canvas, dc = c, draw.New(c)
	} else {
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(dpi))
		canvas, dc = vgimg.PngCanvas{Canvas: c}, draw.New(c)
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(12), PadY: vg.Points(10)}
	cells := plot.Align(panels, tiles, dc)
	for i := range panels {
		panels[i][0].Draw(cells[i][0])
	}
	g, ctx := publish.Watch(context.Background())
	defer g.Close()
	o, err := g.Begin(path)
	if err != nil {
		return published(ctx, fmt.Errorf("--out %s: %w", path, err), "plot", path, "--out")
	}
	defer o.Abort()
	f, err := o.Create(0o644)
	if err != nil {
		return fmt.Errorf("--out %s: %w", path, err)
	}
	_, err = canvas.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = o.Publish(true)
	}
	return published(ctx, err, "plot", path, "--out")
}
