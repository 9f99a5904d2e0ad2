package main

import (
	"context"
	"fmt"
	"github.com/patrdb/patrdb/batch/batchdb"
	"github.com/patrdb/patrdb/client"
	"github.com/patrdb/patrdb/model"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/internal/cputime"
	"github.com/patrdb/patrdb/store"
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

// goFigures times, run by run in turn, the reused-buffer read, an
// allocating read, the by-hand path and the memcpy anchor.
func goFigures(c config, db *store.DB, rows *batch.Batch) ([]*figure, error) {
	n := arrayBytes(rows)
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	var reused batch.Batch
	read := func(dst *batch.Batch) error {
		return db.ViewRun(run0, func(r *store.RunTx) error {
			return batchdb.ReadInto(dst, r, 1, batch.Options{})
		})
	}
	if err := read(&reused); err != nil {
		return nil, err
	}
	url, stop, err := serve(db)
	if err != nil {
		return nil, err
	}
	defer stop()
	cl := client.New(url)
	overHTTP := func() error {
		data, err := cl.Batch(context.Background(), run0, 1, batch.Options{})
		if err != nil {
			return err
		}
		_, err = batch.Decode(data)
		return err
	}
	if err := overHTTP(); err != nil { // the server's first read of the run checks it
		return nil, err
	}
	sides := []func() error{
		func() error { return read(&reused) },
		func() error { return read(new(batch.Batch)) },
		func() error { _, err := byHand(db); return err },
		func() error { copy(dst, src); return nil },
		overHTTP,
	}
	per := make([][]float64, len(sides))    // wall time per side, per repetition
	perCPU := make([][]float64, len(sides)) // process CPU time, the same way
	_, haveCPU := cputime.Process()
	for rep := 0; rep < c.reps; rep++ {
		times, cpus := make([][]float64, len(sides)), make([][]float64, len(sides))
		for it := 0; it < c.iters; it++ {
			for k := range sides {
				s := (k + it + rep) % len(sides) // rotate the order
				runtime.GC()
				c0, _ := cputime.Process()
				t0 := time.Now()
				if err := sides[s](); err != nil {
					return nil, err
				}
				times[s] = append(times[s], time.Since(t0).Seconds())
				c1, _ := cputime.Process()
				cpus[s] = append(cpus[s], c1-c0)
			}
		}
		for s := range sides {
			per[s] = append(per[s], slices.Min(times[s]))
			perCPU[s] = append(perCPU[s], slices.Min(cpus[s]))
		}
	}
	memcpy := per[3]
	name := fmt.Sprintf("memcpy of %.1f MB", float64(n)/1e6)
	figs := []*figure{
		{name: "Go, rows batch of one step, buffers reused (batchdb.ReadInto) vs memcpy of the same bytes", unit: "s",
			got: per[0], anchor: memcpy, gotName: "ReadInto", anchorName: name, target: "≤ 1.5×", max: 1.5},
		{name: "Go, rows batch, fresh buffers (batchdb.Read) vs memcpy", unit: "s",
			got: per[1], anchor: memcpy, gotName: "Read", anchorName: name},
		{name: "Go, rows assembled by hand from RunTx.Trajectory per leaf vs memcpy", unit: "s",
			got: per[2], anchor: memcpy, gotName: "Trajectory per leaf", anchorName: name},
	}
	figs = append(figs, &figure{name: "Go client over HTTP (client.Batch + batch.Decode, loopback) vs the in-process call (batchdb.Read, fresh buffers)", unit: "s",
		got: per[4], anchor: per[1], gotName: "HTTP", anchorName: "batchdb.Read", target: "≤ 2×", max: 2})
	if haveCPU {
		figs = append(figs, &figure{name: "Go, rows batch (ReadInto) vs memcpy, process CPU time instead of wall time (both cores' work counted; getrusage, 1–4 ms resolution)", unit: "s",
			got: perCPU[0], anchor: perCPU[3], gotName: "ReadInto", anchorName: name})
	}
	return figs, nil
}

type handRows struct {
	ids, pos []int32
	mask     []uint8
	lp, adv  []float32
}

// byHand is what a Go trainer wrote before package batch: each leaf's
// Trajectory, its tokens appended to growing arrays.
func byHand(db *store.DB) (*handRows, error) {
	h := &handRows{}
	err := db.ViewRun(run0, func(r *store.RunTx) error {
		groups, err := r.Groups(1)
		if err != nil {
			return err
		}
		for _, g := range groups {
			advs, err := r.Advantages(1, g.ID)
			if err != nil {
				return err
			}
			nodes, err := r.GroupNodes(g)
			if err != nil {
				return err
			}
			slices.SortFunc(nodes, func(a, b model.Node) int { return int(a.ID) - int(b.ID) })
			for _, n := range nodes {
				if !n.Status.Leaf() {
					continue
				}
				adv := float32(0)
				for _, a := range advs {
					if a.Leaf == n.ID {
						adv = float32(a.Advantage)
					}
				}
				traj, err := r.Trajectory(n.ID)
				if err != nil {
					return err
				}
				start := len(h.ids)
				for _, id := range g.PromptTokens {
					h.ids, h.mask, h.lp, h.adv = append(h.ids, int32(id)), append(h.mask, 0), append(h.lp, 0), append(h.adv, 0)
				}
				for _, t := range traj {
					for i, id := range t.ActionTokens {
						h.ids, h.mask, h.adv = append(h.ids, int32(id)), append(h.mask, 1), append(h.adv, adv)
						if len(t.ActionLogprobs) > 0 {
							h.lp = append(h.lp, t.ActionLogprobs[i])
						} else {
							h.lp = append(h.lp, 0)
						}
					}
					for _, id := range t.ObservationTokens {
						h.ids, h.mask, h.lp, h.adv = append(h.ids, int32(id)), append(h.mask, 0), append(h.lp, 0), append(h.adv, 0)
					}
				}
				for i := range len(h.ids) - start {
					h.pos = append(h.pos, int32(i))
				}
			}
		}
		return nil
	})
	return h, err
}

// checkByHand makes sure both Go paths build the same token sequence, so
// the figures compare the same work.
func checkByHand(db *store.DB, rows *batch.Batch) error {
	h, err := byHand(db)
	if err != nil {
		return err
	}
	if !slices.Equal(h.ids, rows.InputIDs) || !slices.Equal(h.pos, rows.Positions) {
		return fmt.Errorf("the by-hand rows (%d tokens) differ from the batch's (%d)", len(h.ids), len(rows.InputIDs))
	}
	return nil
}
