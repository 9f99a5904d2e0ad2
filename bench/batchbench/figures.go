package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/patrdb/patrdb/bench/batchmeasure"
)

// figure is one row of the table: per-repetition values of the measured
// side and its anchor; the ratio is got/anchor within each repetition.
type figure struct {
	name, unit, gotName, anchorName, target string
	got, anchor                             []float64
	max, min                                float64 // the target: ratio <= max, or >= min (0: none)
}

func (f *figure) ratios() []float64 {
	out := make([]float64, len(f.got))
	for i := range f.got {
		out[i] = f.got[i] / f.anchor[i]
	}
	return out
}

func (f *figure) verdict() string {
	if f.max == 0 && f.min == 0 {
		return "—"
	}
	met := 0
	for _, r := range f.ratios() {
		if (f.max != 0 && r <= f.max) || (f.min != 0 && r >= f.min) {
			met++
		}
	}
	switch met {
	case len(f.got):
		return "**met**"
	case 0:
		return "**not met**"
	}
	return "**inconclusive**"
}

func (f *figure) row(w io.Writer) {
	r := f.ratios()
	target := f.target
	if target == "" {
		target = "—"
	}
	fmt.Fprintf(w, "| %s | %s: %s | %s: %s | %.2f× | %.2f×–%.2f× | %s | %s |\n", f.name,
		f.gotName, spread(f.got, f.unit), f.anchorName, spread(f.anchor, f.unit),
		median(r), slices.Min(r), slices.Max(r), target, f.verdict())
}

func spread(xs []float64, unit string) string {
	if len(xs) == 1 {
		return format(xs[0], unit)
	}
	return fmt.Sprintf("%s (%s–%s)", format(median(xs), unit), format(slices.Min(xs), unit), format(slices.Max(xs), unit))
}

func format(x float64, unit string) string {
	switch unit {
	case "s":
		switch {
		case x < 1e-3:
			return fmt.Sprintf("%.1f µs", x*1e6)
		case x < 1:
			return fmt.Sprintf("%.2f ms", x*1e3)
		}
		return fmt.Sprintf("%.3f s", x)
	case "bytes":
		return fmt.Sprintf("%.2f MB", x/1e6)
	}
	return fmt.Sprint(x)
}

// goFigures turns batchmeasure's timings of the reused-buffer read, an
// allocating read, the by-hand path, the memcpy anchor and the Go client
// over HTTP into rows.
func goFigures(c config, step *batchmeasure.Step) ([]*figure, error) {
	t, err := step.Measure(c.reps, c.iters)
	if err != nil {
		return nil, err
	}
	memcpy := t.Wall[batchmeasure.Memcpy]
	name := fmt.Sprintf("memcpy of %.1f MB", float64(batchmeasure.ArrayBytes(step.Rows))/1e6)
	figs := []*figure{
		{name: "Go, rows batch of one step, buffers reused (batchdb.ReadInto) vs memcpy of the same bytes", unit: "s",
			got: t.Wall[batchmeasure.ReadInto], anchor: memcpy, gotName: "ReadInto", anchorName: name, target: "≤ 1.5×", max: 1.5},
		{name: "Go, rows batch, fresh buffers (batchdb.Read) vs memcpy", unit: "s",
			got: t.Wall[batchmeasure.Read], anchor: memcpy, gotName: "Read", anchorName: name},
		{name: "Go, rows assembled by hand from RunTx.Trajectory per leaf vs memcpy", unit: "s",
			got: t.Wall[batchmeasure.ByHand], anchor: memcpy, gotName: "Trajectory per leaf", anchorName: name},
		{name: "Go client over HTTP (client.ReadBatch: the step's source on loopback, built by batch.Assemble) vs the in-process call (batchdb.Read, fresh buffers)", unit: "s",
			got: t.Wall[batchmeasure.HTTP], anchor: t.Wall[batchmeasure.Read], gotName: "HTTP", anchorName: "batchdb.Read", target: "≤ 2×", max: 2},
		{name: "Go client over HTTP, the safetensors file (client.Batch + batch.Decode, loopback, as the Python client reads it) vs batchdb.Read", unit: "s",
			got: t.Wall[batchmeasure.HTTPFile], anchor: t.Wall[batchmeasure.Read], gotName: "HTTP file", anchorName: "batchdb.Read"},
		{name: "Go client over HTTP (client.ReadBatch) from a server that has not checked the run whole, so checks the pages each request reads, vs batchdb.Read", unit: "s",
			got: t.Wall[batchmeasure.HTTPChecking], anchor: t.Wall[batchmeasure.Read], gotName: "HTTP, checking", anchorName: "batchdb.Read"},
	}
	if t.HaveCPU {
		figs = append(figs, &figure{name: "Go, rows batch (ReadInto) vs memcpy, process CPU time instead of wall time (both cores' work counted; getrusage, 1–4 ms resolution)", unit: "s",
			got: t.CPU[batchmeasure.ReadInto], anchor: t.CPU[batchmeasure.Memcpy], gotName: "ReadInto", anchorName: name})
	}
	return figs, nil
}
